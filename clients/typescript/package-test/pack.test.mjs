// The package as an npm user gets it, in two tests.
//
// 1. The tarball: a copy of this folder without dist/ (a clean clone) with its locked
//    dependencies (this folder's install of the lock, linked, or installed in the copy with
//    lifecycle scripts off), so only `npm pack` itself (its prepack script) can build what it
//    ships. The tarball must hold the builds with their source maps and
//    declaration maps, the sources they point at, no install script, and pass publint and
//    @arethetypeswrong/cli (each shown here to fail on a tarball broken the way it should catch).
// 2. The README's install lines, literally, in a scratch project per set of lines: the client
//    release its "Install" block names for each Node version, then the tarball. Every TypeScript
//    block of the README and a service's code (consumer/main.ts) compile under `tsc --strict`
//    (NodeNext as ESM and as CommonJS, and Bundler), and each Node version runnable here runs the
//    consumer and the README's blocks that stand alone against a local HTTP server. Every install
//    and every run must print nothing on stderr (NodeVersionSupportWarning,
//    MaxListenersExceededWarning, npm's warnings).
//
// The Node versions: the one on PATH, and Node's own linux-x64 builds from package-test/
// node-versions (its lock pins them; installed on first use). Installs read the npm cache first
// (`--prefer-offline`) and reach no network but the npm registry.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const PACKAGE = dirname(dirname(fileURLToPath(import.meta.url)));
const MANIFEST = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));
const README = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
const SKIPPED = new Set(['node_modules', 'dist', 'dist-test']);
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--no-update-notifier'];
const NODE_VERSIONS = join(PACKAGE, 'package-test', 'node-versions');

function run(command, args, cwd, options = {}) {
  const started = Date.now();
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', ...options });
  assert.equal(result.status, 0, `${command} ${args.join(' ')} in ${cwd} failed:\n${result.stdout}\n${result.stderr}`);
  if (process.env.TIMING) console.error(`${((Date.now() - started) / 1000).toFixed(1)} s: ${basename(command)} ${args.slice(0, 3).join(' ')}`);
  return result;
}

const npm = (args, cwd) => run('npm', args, cwd);

/** A process run without blocking this one (the local server answers it): its exit, stdout, stderr. */
function runAsync(command, args, options) {
  return new Promise((resolve) => {
    execFile(command, args, { encoding: 'utf8', timeout: 120_000, ...options }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : (err.code ?? 1), stdout, stderr });
    });
  });
}

/** `tsc -p dir`, without blocking: the consumer projects compile side by side. */
async function compile(tsc, dir) {
  const result = await runAsync(process.execPath, [tsc, '-p', dir], { cwd: dir });
  if (result.status !== 0) throw new Error(`tsc -p ${dir} failed:\n${result.stdout}\n${result.stderr}`);
}

/** The ```ts blocks of the README, each a module of its own. */
function readmeBlocks(text) {
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/**
 * The README's install lines: the first ```sh block of its "Install" section, each `npm install`
 * line under the `# Node ...` comment that says which Node versions run it.
 */
function installLines(text) {
  const section = text.slice(text.indexOf('## Install'));
  const block = /^```sh\n([\s\S]*?)^```$/m.exec(section)?.[1] ?? '';
  const lines = [];
  let versions = null;
  for (const line of block.split('\n')) {
    const comment = /^# (.*)$/.exec(line);
    if (comment !== null) {
      versions = /every Node version/.test(comment[1]) ? 'all' : [...comment[1].matchAll(/\d+/g)].map((m) => Number(m[0]));
    } else if (line.startsWith('npm install ')) {
      assert.ok(versions !== null, `install line without a "# Node ..." comment: ${line}`);
      lines.push({ versions, line });
    }
  }
  return lines;
}

function tsconfig(compilerOptions, include) {
  return JSON.stringify({
    compilerOptions: { strict: true, target: 'ES2022', lib: ['ES2022'], types: ['node'], skipLibCheck: true, ...compilerOptions },
    include,
  });
}

/** Every Node runnable here: the one on PATH, then the pinned builds (installed on first use). */
function nodes() {
  const found = [{ major: Number(process.versions.node.split('.')[0]), path: process.execPath }];
  if (process.platform !== 'linux' || process.arch !== 'x64') return found;
  const manifest = JSON.parse(readFileSync(join(NODE_VERSIONS, 'package.json'), 'utf8'));
  const binary = (name) => join(NODE_VERSIONS, 'node_modules', name, 'bin', 'node');
  const wanted = Object.entries(manifest.dependencies).map(([name, spec]) => ({ name, version: spec.split('@').pop() }));
  const installed = (dep) => existsSync(binary(dep.name)) && run(binary(dep.name), ['--version'], NODE_VERSIONS).stdout.trim() === `v${dep.version}`;
  if (!wanted.every(installed)) npm(['ci', ...NPM_FLAGS, '--loglevel=error'], NODE_VERSIONS);
  for (const dep of wanted) {
    const major = Number(dep.version.split('.')[0]);
    if (!found.some((n) => n.major === major)) found.push({ major, path: binary(dep.name) });
  }
  return found;
}

const tmp = mkdtempSync(join(tmpdir(), 'saga-index-package-'));
let packed;

/**
 * Whether this folder's node_modules is exactly its lock's install (npm ci writes the hidden
 * lockfile node_modules/.package-lock.json): the same packages at the same versions.
 */
function installedFromLock() {
  const hidden = join(PACKAGE, 'node_modules', '.package-lock.json');
  if (!existsSync(hidden)) return false;
  const locked = JSON.parse(readFileSync(join(PACKAGE, 'package-lock.json'), 'utf8')).packages;
  const installed = JSON.parse(readFileSync(hidden, 'utf8')).packages;
  const names = Object.keys(locked).filter((name) => name !== '');
  return names.length === Object.keys(installed).length && names.every((name) => installed[name]?.version === locked[name].version);
}

before(() => {
  const copy = join(tmp, 'package');
  cpSync(PACKAGE, copy, {
    recursive: true,
    filter: (src) => !SKIPPED.has(basename(src)) && !src.endsWith('.tgz'),
  });
  // The copy's build tools are the lock's: this folder's own install when it is exactly that
  // (`make ts-client` installs it with npm ci; a second npm ci of the same lock took ~7 s of CPU),
  // linked, else installed in the copy with lifecycle scripts off. Either way no dist/ comes
  // with them: only `npm pack` (prepack) builds what ships.
  if (installedFromLock()) symlinkSync(join(PACKAGE, 'node_modules'), join(copy, 'node_modules'), 'dir');
  else npm(['ci', '--ignore-scripts', ...NPM_FLAGS, '--loglevel=error'], copy);
  assert.ok(!existsSync(join(copy, 'dist')), 'the clean copy has no dist/ before npm pack');
  const [info] = JSON.parse(npm(['pack', '--json', '--pack-destination', tmp], copy).stdout);
  packed = { ...info, path: join(tmp, info.filename), copy };
});

after(() => rmSync(tmp, { recursive: true, force: true }));

test('the tarball: builds with source and declaration maps, their sources, no install script, clean exports', { timeout: 300_000 }, () => {
  const shipped = packed.files.map((f) => f.path).sort();
  const sources = readdirSync(join(PACKAGE, 'src')).filter((f) => f.endsWith('.ts') && f !== 'internal.ts');
  const expected = ['README.md', 'package.json', 'dist/cjs/package.json', ...sources.map((f) => `src/${f}`)];
  for (const build of ['esm', 'cjs']) {
    for (const f of sources) {
      const stem = `dist/${build}/${f.replace(/\.ts$/, '')}`;
      expected.push(`${stem}.js`, `${stem}.js.map`, `${stem}.d.ts`, `${stem}.d.ts.map`);
    }
  }
  assert.deepEqual(shipped, expected.sort());
  assert.ok(!shipped.some((f) => f.includes('internal')), 'the tests-only internal entry ships');

  const unpacked = join(tmp, 'unpacked');
  mkdirSync(unpacked);
  run('tar', ['-xzf', packed.path, '-C', unpacked], tmp);
  const root = join(unpacked, 'package');
  // Every map names sources that ship, relative to the map.
  for (const map of shipped.filter((f) => f.endsWith('.map'))) {
    const { sources: named } = JSON.parse(readFileSync(join(root, map), 'utf8'));
    assert.equal(named.length, 1, map);
    const target = relative(root, join(root, dirname(map), named[0]));
    assert.ok(shipped.includes(target), `${map} points at ${target}, which does not ship`);
  }
  // npm runs these on install (npm 11 asks before running any); prepack runs only on `npm pack`.
  const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts ?? {};
  for (const name of ['preinstall', 'install', 'postinstall', 'prepare']) {
    assert.equal(scripts[name], undefined, `the packed package.json has an install-time ${name} script`);
  }

  const bin = join(packed.copy, 'node_modules', '.bin');
  run(join(bin, 'publint'), ['run', packed.path, '--strict'], tmp);
  run(join(bin, 'attw'), [packed.path, '--format', 'ascii'], tmp);
  // Each checker fails on the tarball broken the way it exists to catch.
  const broken = (name, change) => {
    const dir = join(tmp, name);
    cpSync(root, join(dir, 'package'), { recursive: true });
    change(join(dir, 'package'));
    run('tar', ['-czf', `${dir}.tgz`, '-C', dir, 'package'], tmp);
    return `${dir}.tgz`;
  };
  const esmAsCjs = broken('cjs-read-as-esm', (dir) => rmSync(join(dir, 'dist', 'cjs', 'package.json')));
  assert.notEqual(spawnSync(join(bin, 'attw'), [esmAsCjs, '--format', 'ascii'], { cwd: tmp }).status, 0, 'attw passed a CommonJS build read as ESM');
  const missing = broken('missing-entry', (dir) => rmSync(join(dir, 'dist', 'cjs', 'index.js')));
  assert.notEqual(spawnSync(join(bin, 'publint'), ['run', missing, '--strict'], { cwd: tmp }).status, 0, 'publint passed an exports entry that does not exist');
});

/** A local DynamoDB stand-in for the README's blocks: no control record, one saga under the legacy key. */
function localServer() {
  const row = {
    PK: { S: 'RSAGA#s-42' },
    SK: { S: 'META' },
    entityType: { S: 'RenewalSaga' },
    sagaId: { S: 's-42' },
    personId: { S: 'person-42' },
    leaseId: { S: 'lease-42' },
    openedAt: { S: '2026-07-10T12:00:00.000Z' },
    state: { S: 'OPENED' },
    GSI4PK: { S: 'RenewalSaga' },
    GSI4SK: { S: 'person-42#2026-07-10T12:00:00.000Z' },
  };
  return createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const input = JSON.parse(body);
      const values = input.ExpressionAttributeValues ?? {};
      const prefix = values[':prefix']?.S;
      let output = { Items: [], Count: 0, ScannedCount: 0 };
      if (String(req.headers['x-amz-target']).endsWith('.GetItem')) output = {};
      else if (input.IndexName !== undefined && values[':pk']?.S === 'RenewalSaga' && (prefix === undefined || prefix === 'person-42#')) {
        output = { Items: [row], Count: 1, ScannedCount: 1 };
      }
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0', connection: 'close' });
      res.end(JSON.stringify(output));
    });
  });
}

test("the README's install lines, per Node version: install, compile, import, read, and nothing on stderr", { timeout: 900_000 }, async (t) => {
  const lines = installLines(README);
  const runnable = nodes();
  t.diagnostic(`Node versions: ${runnable.map((n) => n.major).join(', ')}`);
  const sets = new Map();
  for (const { major } of runnable) {
    const mine = lines.filter((l) => l.versions === 'all' || l.versions.includes(major)).map((l) => l.line);
    assert.ok(mine.some((l) => l.includes('@aws-sdk/client-dynamodb@')), `the README names no client for Node ${major}`);
    const key = mine.join('\n');
    sets.set(key, [...(sets.get(key) ?? []), major]);
  }
  const blocks = readmeBlocks(README);
  assert.ok(blocks.length >= 4, `the README has ${blocks.length} TypeScript blocks`);
  const standAlone = blocks.map((b, n) => ({ b, n })).filter(({ b }) => !/^declare /m.test(b)).map(({ n }) => n);
  assert.ok(standAlone.length >= 3, `the README's stand-alone blocks: ${standAlone}`);
  const main = readFileSync(join(PACKAGE, 'package-test', 'consumer', 'main.ts'), 'utf8');
  const server = localServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_ENDPOINT_URL_DYNAMODB: `http://127.0.0.1:${server.address().port}`,
  };
  try {
    let setNumber = 0;
    for (const [key, majors] of sets) {
      const scratch = join(tmp, `scratch-${setNumber++}`);
      mkdirSync(scratch);
      writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
      cpSync(packed.path, join(scratch, packed.filename));
      for (const line of key.split('\n')) {
        const args = line.split(' ').slice(1);
        const result = npm([...args, ...NPM_FLAGS], scratch);
        assert.equal(result.stderr, '', `${line} (Node ${majors}) printed on stderr`);
      }
      const installed = join(scratch, 'node_modules', ...MANIFEST.name.split('/'));
      assert.ok(existsSync(join(installed, 'dist', 'cjs', 'index.js')), 'the tarball is installed, not linked');
      // The service's own toolchain, which the README does not install.
      npm(['install', '--save-dev', `typescript@${MANIFEST.devDependencies.typescript}`, `@types/node@${MANIFEST.devDependencies['@types/node']}`, ...NPM_FLAGS], scratch);

      const projects = {
        esm: { type: 'module', options: { module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'out' } },
        cjs: { type: 'commonjs', options: { module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'out' } },
        bundler: { type: 'module', options: { module: 'ESNext', moduleResolution: 'Bundler', noEmit: true } },
      };
      const tsc = join(scratch, 'node_modules', 'typescript', 'bin', 'tsc');
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

      for (const major of majors) {
        const node = runnable.find((n) => n.major === major).path;
        const seen = {};
        for (const name of ['esm', 'cjs']) {
          const result = await runAsync(node, [join(scratch, name, 'out', 'main.js')], { cwd: scratch, env });
          assert.equal(result.status, 0, `Node ${major} ${name}: ${result.stderr}`);
          assert.equal(result.stderr, '', `Node ${major}, ${name} consumer, printed on stderr`);
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
          // The record (GetItem, then the newest history items, then the lost-record probe of
          // four shard keys) once per T, one Query per read.
          commands: ['control', 'control', 'index', 'index', 'index', 'index', 'index', 'index'],
        });
        // The README's blocks that stand alone, against the local server over HTTP.
        for (const n of standAlone) {
          const result = await runAsync(node, [join(scratch, 'esm', 'out', `readme-${n}.js`)], { cwd: scratch, env });
          assert.equal(result.status, 0, `Node ${major}, README block ${n}: ${result.stderr}`);
          assert.equal(result.stderr, '', `Node ${major}, README block ${n}, printed on stderr`);
        }
        const api = await runAsync(node, [join(scratch, 'esm', 'out', `readme-${standAlone[0]}.js`)], { cwd: scratch, env });
        assert.equal(api.stdout, '1\n', 'the API block prints the one open saga page');
      }
    }
  } finally {
    server.close();
  }
});
