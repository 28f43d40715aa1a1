// The build `npm run build` (and `npm pack`, through `prepack`) runs: the sources compiled twice,
// ES modules into dist/esm and CommonJS into dist/cjs, each with its declarations, source maps and
// declaration maps (they point at src/, which ships). dist/cjs/package.json marks that folder
// CommonJS, so Node loads its .js files as CommonJS and TypeScript reads its .d.ts files as
// CommonJS declarations (the package itself is "type": "module").
//
// Why not tshy or tsup: this is `tsc` run twice with the pinned TypeScript, and the package test
// checks what it ships with publint and @arethetypeswrong/cli. Measured on a clean install
// (2026-12-06): tshy 4.1.3 adds 29 packages, 74 MB (TypeScript 6 and @typescript/native-preview
// beside the pinned 5.9.3, so the shipped declarations would come from another compiler than
// `npm run typecheck`), and rewrites `exports` in package.json on every build; tsup 9.0.0 adds
// 46 packages, 24 MB, and bundles, so the shipped files would no longer be one per source file.
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
