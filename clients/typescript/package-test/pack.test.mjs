// The package as an npm user gets it. A copy of this folder without dist/ and node_modules (a
// clean clone) installs its locked dependencies with lifecycle scripts off, so only `npm pack`
// itself can build what it ships; the tarball is then installed into a scratch project, where a
// service's code (consumer/main.ts) and every TypeScript block of the README compile under
// `tsc --strict` (NodeNext as ESM and as CommonJS, and Bundler), and the ESM and CommonJS
// builds of the consumer run against the installed package.
//
// The installs read the npm cache first (`--prefer-offline`): the scratch project's lock is the
// package's own, so every dependency is the version `npm ci` already fetched.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const PACKAGE = dirname(dirname(fileURLToPath(import.meta.url)));
const MANIFEST = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));
const SKIPPED = new Set(['node_modules', 'dist', 'dist-test']);
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

function run(command, args, cwd) {
  const started = Date.now();
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', shell: process.platform === 'win32' });
  assert.equal(result.status, 0, `${command} ${args.join(' ')} in ${cwd} failed:\n${result.stdout}\n${result.stderr}`);
  if (process.env.TIMING) console.error(`${((Date.now() - started) / 1000).toFixed(1)} s: ${basename(command)} ${args.slice(0, 3).join(' ')}`);
  return result;
}

const npm = (args, cwd) => run('npm', args, cwd);

/** `tsc -p dir`, without blocking: the three consumer projects compile side by side. */
function compile(tsc, dir) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [tsc, '-p', dir], { cwd: dir }, (err, stdout, stderr) => {
      if (err) reject(new Error(`tsc -p ${dir} failed:\n${stdout}\n${stderr}`));
      else resolve();
    });
  });
}

/** The ```ts blocks of the README, each a module of its own. */
function readmeBlocks(text) {
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** The scratch project's lock: the package's own (every version `npm ci` fetched), re-rooted. */
function scratchLock(dependencies) {
  const lock = JSON.parse(readFileSync(join(PACKAGE, 'package-lock.json'), 'utf8'));
  const packages = { '': { name: 'scratch', dependencies } };
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '') continue;
    const { dev: _dev, devOptional: _devOptional, ...rest } = entry;
    packages[path] = rest;
  }
  return { name: 'scratch', lockfileVersion: lock.lockfileVersion, requires: true, packages };
}

function tsconfig(compilerOptions, include) {
  return JSON.stringify({
    compilerOptions: { strict: true, target: 'ES2022', lib: ['ES2022'], types: ['node'], skipLibCheck: true, ...compilerOptions },
    include,
  });
}

test('npm pack on a clean copy builds dist; ESM, CommonJS and Bundler consumers compile and run', { timeout: 300_000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'saga-index-package-'));
  try {
    const copy = join(tmp, 'package');
    cpSync(PACKAGE, copy, {
      recursive: true,
      filter: (src) => !SKIPPED.has(basename(src)) && !src.endsWith('.tgz'),
    });
    npm(['ci', '--ignore-scripts', ...NPM_FLAGS], copy);
    assert.ok(!existsSync(join(copy, 'dist')), 'the clean copy has no dist/ before npm pack');

    const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', tmp], copy).stdout);
    const shipped = packed.files.map((f) => f.path).sort();
    for (const file of [
      'README.md',
      'package.json',
      'dist/esm/index.js',
      'dist/esm/index.d.ts',
      'dist/cjs/index.js',
      'dist/cjs/index.d.ts',
      'dist/cjs/package.json',
    ]) {
      assert.ok(shipped.includes(file), `${file} is not in the tarball: ${shipped.join(', ')}`);
    }
    assert.deepEqual(
      shipped.filter((f) => !/^dist\/(esm|cjs)\/[a-z]+\.(js|d\.ts)$/.test(f)),
      ['README.md', 'dist/cjs/package.json', 'package.json'],
    );
    assert.ok(!shipped.some((f) => f.includes('internal')), 'the tests-only internal entry ships');

    const scratch = join(tmp, 'scratch');
    mkdirSync(scratch);
    const dependencies = {
      ...MANIFEST.devDependencies,
      [MANIFEST.name]: `file:${relative(scratch, join(tmp, packed.filename))}`,
    };
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', private: true, dependencies }));
    writeFileSync(join(scratch, 'package-lock.json'), JSON.stringify(scratchLock(dependencies)));
    npm(['install', ...NPM_FLAGS], scratch);
    const installed = join(scratch, 'node_modules', ...MANIFEST.name.split('/'));
    assert.ok(existsSync(join(installed, 'dist', 'cjs', 'index.js')), 'the tarball is installed, not linked');

    const main = readFileSync(join(PACKAGE, 'package-test', 'consumer', 'main.ts'), 'utf8');
    const projects = {
      esm: { type: 'module', options: { module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'out' } },
      cjs: { type: 'commonjs', options: { module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'out' } },
      bundler: { type: 'module', options: { module: 'ESNext', moduleResolution: 'Bundler', noEmit: true } },
    };
    const tsc = join(scratch, 'node_modules', 'typescript', 'bin', 'tsc');
    // The README's blocks as a service would paste them into an ES module, compiled with it.
    const blocks = readmeBlocks(readFileSync(join(PACKAGE, 'README.md'), 'utf8'));
    assert.ok(blocks.length >= 4, `the README has ${blocks.length} TypeScript blocks`);
    const compiled = Object.entries(projects).map(([name, { type, options }]) => {
      const dir = join(scratch, name);
      mkdirSync(dir);
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ type }));
      writeFileSync(join(dir, 'main.ts'), main);
      if (name === 'esm') blocks.forEach((block, n) => writeFileSync(join(dir, `readme-${n}.ts`), block));
      writeFileSync(join(dir, 'tsconfig.json'), tsconfig(options, ['*.ts']));
      return compile(tsc, dir);
    });
    // Every compile settles before any failure is reported (the scratch folder is then removed).
    const failed = (await Promise.allSettled(compiled)).filter((r) => r.status === 'rejected');
    assert.deepEqual(failed.map((r) => r.reason.message), []);

    const seen = {};
    for (const name of ['esm', 'cjs']) {
      const result = run(process.execPath, [join(scratch, name, 'out', 'main.js')], scratch);
      assert.doesNotMatch(result.stderr, /NodeVersionSupportWarning/);
      seen[name] = JSON.parse(result.stdout);
    }
    assert.deepEqual(seen.cjs, seen.esm);
    const { exports, ...rest } = seen.esm;
    assert.ok(exports.includes('SagaIndex') && !exports.includes('parseStateItem'), exports.join(', '));
    assert.deepEqual(rest, {
      shard: 14,
      open: [['s-1', 'OPENED', true]],
      pages: [['p-1:lease-1']],
      keys: { GSI4PK: 'RenewalSaga', GSI4SK: 'p-1#2026-07-10T12:00:00.000Z' },
      layouts: [[null, 'legacy']],
      classes: [true, false],
      // The record (GetItem, then the newest history items, then the lost-record probe of four
      // shard keys) once per T, one Query per read.
      commands: ['control', 'control', 'index', 'index', 'index', 'index', 'index', 'index'],
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
