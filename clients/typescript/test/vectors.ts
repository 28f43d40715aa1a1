// The contract vectors generated from the Python code into the repository's docs/. The
// environment variable SAGA_INDEX_VECTORS_DIR points elsewhere: the Python conformance test
// runs these suites on tampered copies to show that a disagreement fails them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// dist-test/test/vectors.js -> the repository's docs/
const DOCS = fileURLToPath(new URL('../../../../docs/', import.meta.url));

export function docsJson<T>(name: string): T {
  const dir = process.env.SAGA_INDEX_VECTORS_DIR ?? DOCS;
  return JSON.parse(readFileSync(join(dir, name), 'utf8')) as T;
}
