// Preloaded into the dynalite process (devkit/dynalite.py: node --require this cli.js).
//
// dynalite's request handler rethrows a request's 'error' event (node_modules/dynalite/index.js:
// `req.on('error', function (err) { throw err })`), so one client that hangs up in the middle of
// sending a request (a process killed mid-write, a Ctrl-C) ended the server for every other
// client. DynamoDB drops that one request and answers the rest; so does this: the error of an
// aborted request is dropped, and any other uncaught error still ends the process, printed.
'use strict';

process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) return;
  console.error(err);
  process.exit(1);
});
