// Failures no retry can fix: the table or the index does not exist where the client looks, the
// caller's credentials are refused or missing, or the request does not fit the table. They are
// told apart from the transient failures (IncompleteEnumerationError, retried by the caller) so
// that a wrong `indexName` or a missing IAM grant pages someone instead of being retried forever.
import { describeError, SagaIndexError } from './errors.js';
import { OPEN_INDEX_NAME, OPEN_INDEX_PARTITION_KEY } from './keys.js';

/** What was misconfigured, and what to change; `cause` is the SDK's error. */
export class SagaIndexConfigurationError extends SagaIndexError {
  /** The SDK error's name (`ResourceNotFoundException`, `AccessDeniedException`, ...). */
  readonly errorName: string;

  constructor(message: string, errorName: string, cause: unknown) {
    super(message, { cause });
    this.errorName = errorName;
  }
}

export interface Resource {
  readonly tableName: string;
  readonly indexName?: string;
  /** The index's partition key attribute: GSI4PK when absent, OpenSagaPK for the open index. */
  readonly partitionKey?: string | undefined;
}

/** What to check when the table refused a Query of `r`'s index: the option that names it. */
function indexFix(r: Resource & { readonly indexName: string }): string {
  const open = r.partitionKey === OPEN_INDEX_PARTITION_KEY;
  const option = open
    ? `openIndexName (default ${OPEN_INDEX_NAME})`
    : 'indexName (default renewal-saga-person-index)';
  const keys = open ? `${OPEN_INDEX_PARTITION_KEY} / GSI4SK` : 'GSI4PK / GSI4SK';
  return (
    `table ${JSON.stringify(r.tableName)} refused the query of index ${JSON.stringify(r.indexName)}: ` +
    `check ${option} and that the table has that index, keyed ${keys}`
  );
}

// The SDK's error names (the service's error codes, or the SDK's own for credentials) that mean
// "this configuration cannot work", with what to do about each.
const FIXES: ReadonlyMap<string, (r: Resource) => string> = new Map([
  [
    'ResourceNotFoundException',
    (r: Resource) =>
      `table ${JSON.stringify(r.tableName)} does not exist where the client looks: check ` +
      'tableName and the DynamoDBClient region and endpoint',
  ],
  [
    'ValidationException',
    (r: Resource) =>
      r.indexName === undefined
        ? `table ${JSON.stringify(r.tableName)} refused the request: check tableName (the ` +
          'table must have the string keys PK and SK)'
        : indexFix({ ...r, indexName: r.indexName }),
  ],
  [
    'AccessDeniedException',
    (r: Resource) =>
      `access to table ${JSON.stringify(r.tableName)} is denied: grant the caller ` +
      'dynamodb:GetItem and dynamodb:Query on the table and dynamodb:Query on its index ' +
      `(arn:...:table/${r.tableName} and arn:...:table/${r.tableName}/index/*)`,
  ],
  [
    'UnrecognizedClientException',
    () => 'the credentials are not valid for this endpoint: check the DynamoDBClient credentials and region',
  ],
  [
    'CredentialsProviderError',
    () => 'no AWS credentials were found: give the process credentials (role, profile or environment)',
  ],
]);

/** `err` as a SagaIndexConfigurationError when it is one no retry fixes, else null. */
export function asConfigurationError(err: unknown, resource: Resource): SagaIndexConfigurationError | null {
  if (err instanceof SagaIndexConfigurationError) return err;
  const name = err instanceof Error ? err.name : undefined;
  const fix = name === undefined ? undefined : FIXES.get(name);
  if (name === undefined || fix === undefined) return null;
  return new SagaIndexConfigurationError(`${fix(resource)} (${describeError(err)})`, name, err);
}
