/**
 * Typings wa-sqlite 1.0 does not ship: the AccessHandlePoolVFS example and the Emscripten
 * module its dist builds produce. (The package's own index.d.ts declares 'wa-sqlite',
 * the dist factories, VFS.js and MemoryVFS; it types VFS.Base#xRead's buffer wrongly, which
 * node-file-vfs.ts works around with its own VfsBase interface.)
 */

declare module 'wa-sqlite/src/examples/AccessHandlePoolVFS.js' {
  /**
   * A synchronous OPFS VFS over a pool of FileSystemSyncAccessHandles (dedicated worker only).
   * Typed against the global SQLiteVFS rather than VFS.Base, whose shipped xRead typing is stale.
   */
  // The shipped class and the global interface describe one object; merging them is the point.
  // eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type
  export interface AccessHandlePoolVFS extends SQLiteVFS {}
  // eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
  export class AccessHandlePoolVFS {
    constructor(directoryPath: string);
    readonly name: string;
    /** Settles when the access handles of the directory are acquired. */
    readonly isReady: Promise<void>;
    close(): Promise<void>;
    getSize(): number;
    getCapacity(): number;
    addCapacity(n: number): Promise<number>;
    removeCapacity(n: number): Promise<number>;
  }
}
