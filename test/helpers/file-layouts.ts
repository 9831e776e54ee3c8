import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A config file as operators deploy it; `update` changes it the way that deployment does. */
export interface FileLayout {
  readonly path: string;
  update(content: string): void;
}

/**
 * The ways a watched file gets replaced in practice. Each creates the file in
 * a fresh temp folder with `initial` content.
 */
export const FILE_LAYOUTS: ReadonlyArray<readonly [string, (name: string, initial: string) => FileLayout]> = [
  [
    'plain file, edited in place',
    (name, initial) => {
      const path = join(mkdtempSync(join(tmpdir(), 'keygate-layout-')), name);
      writeFileSync(path, initial);
      return { path, update: (c) => writeFileSync(path, c) };
    },
  ],
  [
    'plain file, saved by rename (editors)',
    (name, initial) => {
      const path = join(mkdtempSync(join(tmpdir(), 'keygate-layout-')), name);
      writeFileSync(path, initial);
      return {
        path,
        update: (c) => {
          writeFileSync(`${path}.tmp`, c);
          renameSync(`${path}.tmp`, path);
        },
      };
    },
  ],
  [
    'symlink to a file in another folder, edited there',
    (name, initial) => {
      const root = mkdtempSync(join(tmpdir(), 'keygate-layout-'));
      mkdirSync(join(root, 'real'));
      mkdirSync(join(root, 'link'));
      const target = join(root, 'real', `actual-${name}`);
      writeFileSync(target, initial);
      const path = join(root, 'link', name);
      symlinkSync(target, path);
      return { path, update: (c) => writeFileSync(target, c) };
    },
  ],
  [
    'Kubernetes ConfigMap/Secret volume (..data swap)',
    (name, initial) => {
      // What the kubelet's atomic writer does: name -> ..data/name, ..data -> ..<timestamp>;
      // an update writes a new timestamped folder, renames a new ..data link over the old one
      // and deletes the old folder. No event ever carries the file's own name.
      const root = mkdtempSync(join(tmpdir(), 'keygate-layout-'));
      let generation = 0;
      let current = '';
      const publish = (c: string) => {
        const folder = `..2024_01_01_00_00_0${generation++}.${process.pid}`;
        mkdirSync(join(root, folder));
        writeFileSync(join(root, folder, name), c);
        symlinkSync(folder, join(root, '..data_tmp'));
        renameSync(join(root, '..data_tmp'), join(root, '..data'));
        if (current) rmSync(join(root, current), { recursive: true });
        current = folder;
      };
      publish(initial);
      symlinkSync(join('..data', name), join(root, name));
      return { path: join(root, name), update: publish };
    },
  ],
];
