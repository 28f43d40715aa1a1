// The fast engine's refusals as the AWS SDK for JavaScript v3 parses them: run by
// tests/conformance/test_engine_sdk_v3.py as `node engine_sdk_v3.mjs PACKAGE_DIR ENDPOINT TABLE`,
// with the SDK from the TypeScript package's node_modules. Prints what it saw as JSON; exits
// non-zero when the SDK did not give the error class, name and fields DynamoDB's would.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";

const [packageDir, endpoint, table] = process.argv.slice(2);
const require = createRequire(path.join(packageDir, "package.json"));
const sdk = require("@aws-sdk/client-dynamodb");
const client = new sdk.DynamoDBClient({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "local", secretAccessKey: "local" },
  maxAttempts: 1,
});
const send = (command) => client.send(command);
const key = (pk) => ({ PK: { S: pk }, SK: { S: "META" } });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const arn = `arn:aws:dynamodb:us-east-1:123456789012:table/${table}`;
const seen = {};

await send(
  new sdk.CreateTableCommand({
    TableName: table,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [
      { AttributeName: "PK", AttributeType: "S" },
      { AttributeName: "SK", AttributeType: "S" },
    ],
    KeySchema: [
      { AttributeName: "PK", KeyType: "HASH" },
      { AttributeName: "SK", KeyType: "RANGE" },
    ],
  }),
);

// A key past its write ceiling (the engine runs with a small one): ThrottlingException.
let throttled;
for (let n = 0; n < 20 && !throttled; n += 1) {
  try {
    await send(
      new sdk.PutItemCommand({
        TableName: table,
        Item: { PK: { S: "hot" }, SK: { S: `s${n}` }, pad: { S: "x".repeat(900) } },
      }),
    );
  } catch (err) {
    throttled = err;
  }
}
assert.ok(throttled instanceof sdk.ThrottlingException, String(throttled));
assert.equal(throttled.name, "ThrottlingException");
assert.equal(throttled.$metadata.httpStatusCode, 400);
assert.deepEqual(throttled.throttlingReasons, [
  { reason: "TableWriteKeyRangeThroughputExceeded", resource: arn },
]);
seen.throttle = { name: throttled.name, throttlingReasons: throttled.throttlingReasons };

// A transaction holds its item (the engine holds one for a second): a plain write of it meets
// TransactionConflictException, another transaction including it is cancelled.
await send(new sdk.PutItemCommand({ TableName: table, Item: { ...key("held"), n: { N: "0" } } }));
const holding = send(
  new sdk.TransactWriteItemsCommand({
    TransactItems: [
      {
        Update: {
          TableName: table,
          Key: key("held"),
          UpdateExpression: "SET n = :v",
          ExpressionAttributeValues: { ":v": { N: "1" } },
        },
      },
    ],
  }),
);
await sleep(300);
const conflict = await send(
  new sdk.PutItemCommand({ TableName: table, Item: { ...key("held"), n: { N: "5" } } }),
).catch((err) => err);
assert.ok(conflict instanceof sdk.TransactionConflictException, String(conflict));
assert.equal(conflict.name, "TransactionConflictException");
const cancelled = await send(
  new sdk.TransactWriteItemsCommand({
    TransactItems: [
      { Put: { TableName: table, Item: { ...key("free"), n: { N: "1" } } } },
      {
        ConditionCheck: {
          TableName: table,
          Key: key("held"),
          ConditionExpression: "attribute_exists(PK)",
        },
      },
    ],
  }),
).catch((err) => err);
await holding;
assert.ok(cancelled instanceof sdk.TransactionCanceledException, String(cancelled));
assert.equal(cancelled.name, "TransactionCanceledException");
assert.deepEqual(cancelled.CancellationReasons, [
  { Code: "None" },
  { Code: "TransactionConflict", Message: "Transaction is ongoing for the item" },
]);
seen.conflict = { name: conflict.name };
seen.cancelled = { name: cancelled.name, CancellationReasons: cancelled.CancellationReasons };

// A condition that fails inside a transaction: cancelled, the reason on its action.
const failed = await send(
  new sdk.TransactWriteItemsCommand({
    TransactItems: [
      {
        ConditionCheck: {
          TableName: table,
          Key: key("held"),
          ConditionExpression: "n = :two",
          ExpressionAttributeValues: { ":two": { N: "2" } },
        },
      },
    ],
  }),
).catch((err) => err);
assert.ok(failed instanceof sdk.TransactionCanceledException, String(failed));
assert.deepEqual(
  failed.CancellationReasons.map((reason) => reason.Code),
  ["ConditionalCheckFailed"],
);
seen.conditionFailed = { CancellationReasons: failed.CancellationReasons };

process.stdout.write(`${JSON.stringify(seen)}\n`);
