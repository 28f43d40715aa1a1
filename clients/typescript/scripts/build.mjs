// The build `npm run build` (and so `npm pack` and `npm ci`, through `prepare`) runs: the sources
// compiled twice, ES modules into dist/esm and CommonJS into dist/cjs, each with its
// declarations. dist/cjs/package.json marks that folder CommonJS, so Node loads its .js files as
// CommonJS and TypeScript reads its .d.ts files as CommonJS declarations (the package itself is
// "type": "module").
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(join(root, 'dist'), { recursive: true, force: true });
for (const project of ['tsconfig.json', 'tsconfig.cjs.json']) {
  const run = spawnSync(process.execPath, [tsc, '-p', join(root, project)], { stdio: 'inherit' });
  if (run.status !== 0) {
    console.error(`build: tsc -p ${project} failed`);
    process.exit(run.status ?? 1);
  }
}
mkdirSync(join(root, 'dist', 'cjs'), { recursive: true });
writeFileSync(join(root, 'dist', 'cjs', 'package.json'), '{\n  "type": "commonjs"\n}\n');
