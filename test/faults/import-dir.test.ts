/**
 * Issue 39 item 6: the import's `storage_path` (POST /v1/admin/devshards/import with devshardctl's
 * body) could probe any path of the machine ("does not exist" vs "not a directory" vs "no
 * epoch_<n>.db"). Now it must lie inside DEVSHARD_IMPORT_DIR once symlinks and `..` are resolved;
 * unset, storage_path imports are refused with a 400 naming the variable. A path outside gets the
 * same answer whether or not it exists, and the answer never names it.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeDirWithin } from '../../src/gateway/devshardctl/store.js';
import { disposeTestGateway, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const root = mkdtempSync(join(tmpdir(), 'shardgate-import-dir-'));
const importDir = join(root, 'imports');
const outside = join(root, 'outside');
mkdirSync(join(importDir, 'store'), { recursive: true });
mkdirSync(join(outside, 'secret-dir'), { recursive: true });
symlinkSync(outside, join(importDir, 'to-outside'));
symlinkSync(join(root, 'nowhere'), join(importDir, 'dangling'));
symlinkSync(join(importDir, 'loop-b'), join(importDir, 'loop-a'));
symlinkSync(join(importDir, 'loop-a'), join(importDir, 'loop-b'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('storeDirWithin', () => {
  it('accepts paths inside, resolving relative ones from the import dir and state.db to its directory', () => {
    expect(storeDirWithin(importDir, join(importDir, 'store'))).toEqual({ dir: join(importDir, 'store'), real: join(realpathSync(importDir), 'store') });
    expect(storeDirWithin(importDir, 'store/state.db').dir).toBe(join(importDir, 'store'));
    expect(storeDirWithin(importDir, `${importDir}/store/../store/`).dir).toBe(join(importDir, 'store'));
    expect(storeDirWithin(importDir, join(importDir, 'not-yet')).dir).toBe(join(importDir, 'not-yet'));
  });

  it('refuses paths outside, through .. or a symlink, existing or not', () => {
    for (const p of ['/etc', '/no/such/path', join(importDir, '..', 'outside'), '../outside/secret-dir', join(importDir, 'to-outside'), join(importDir, 'to-outside', 'secret-dir'), join(importDir, 'to-outside', 'no-such'), join(importDir, 'dangling', 'x'), join(importDir, 'dangling'), join(importDir, 'loop-a', 'x')]) {
      expect(() => storeDirWithin(importDir, p), p).toThrow(/outside DEVSHARD_IMPORT_DIR/);
    }
  });

  it('unset: refused, naming the variable', () => {
    expect(() => storeDirWithin(undefined, join(importDir, 'store'))).toThrow(/DEVSHARD_IMPORT_DIR is unset/);
  });
});

describe('import storage_path through HTTP', () => {
  let unset: TestGateway;
  let gw: TestGateway;
  beforeAll(async () => {
    unset = await startTestGateway({ env: { LOG_LEVEL: 'warn' } });
    gw = await startTestGateway({ env: { LOG_LEVEL: 'warn', DEVSHARD_IMPORT_DIR: importDir } });
  });
  afterAll(async () => {
    await disposeTestGateway(unset);
    await disposeTestGateway(gw);
  });
  const body = (storage_path: string) => ({ body: { id: '999', storage_path, private_key_env: 'DEVSHARD_PRIVATE_KEY' } });

  it('DEVSHARD_IMPORT_DIR unset: a 400 naming the variable, whatever the path', async () => {
    for (const p of ['/etc', join(importDir, 'store')]) {
      const r = await unset.call('/v1/admin/devshards/import', body(p));
      expect(r.status, r.text).toBe(400);
      expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param: 'storage_path', code: 'import_dir_unset' });
      expect(r.json.error.message).toContain('DEVSHARD_IMPORT_DIR');
    }
  });

  it('outside the import dir: one answer for existing and missing paths, never naming them', async () => {
    const answers = [];
    for (const p of ['/etc', '/etc/passwd', '/no/such/path', join(importDir, '..', 'outside', 'secret-dir'), join(importDir, 'to-outside', 'secret-dir'), join(importDir, 'to-outside', 'no-such')]) {
      const r = await gw.call('/v1/admin/devshards/import', body(p));
      expect(r.status, r.text).toBe(400);
      expect(r.json.error).toMatchObject({ param: 'storage_path', code: 'storage_path_outside_import_dir' });
      expect(r.json.error.message).not.toContain('secret-dir');
      expect(r.json.error.message).not.toContain('/etc');
      answers.push(r.text);
    }
    expect(new Set(answers).size).toBe(1);
  });

  it('inside the import dir: the store checks as before', async () => {
    const r = await gw.call('/v1/admin/devshards/import', body(join(importDir, 'store')));
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatchObject({ param: 'storage_path', code: 'store_not_found' });
    expect(r.json.error.message).toContain('epoch_<n>.db');
  });
});
