/**
 * A synchronous wa-sqlite VFS on node:fs, so Node tests and benchmarks can close a database and
 * reopen it from the same path (a client "restart"). Rollback journals are ordinary files next
 * to the database, as with SQLite's unix VFS.
 *
 * Locking is a no-op: one process, and every connection to a file goes through the adapter's
 * queue. Two connections writing the same file at once are not supported.
 */
import {
  closeSync,
  constants,
  existsSync,
  fdatasyncSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  unlinkSync,
  accessSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as VFS from 'wa-sqlite/src/VFS.js';

/** VFS.Base as it really is in wa-sqlite 1.0 (the shipped typing of xRead/xWrite's buffer is stale). */
interface VfsBase {
  mxPathName: number;
  xClose(fileId: number): number;
  xRead(fileId: number, pData: Uint8Array, iOffset: number): number;
  xWrite(fileId: number, pData: Uint8Array, iOffset: number): number;
  xTruncate(fileId: number, iSize: number): number;
  xSync(fileId: number, flags: number): number;
  xFileSize(fileId: number, pSize64: DataView): number;
  xLock(fileId: number, flags: number): number;
  xUnlock(fileId: number, flags: number): number;
  xCheckReservedLock(fileId: number, pResOut: DataView): number;
  xFileControl(fileId: number, op: number, pArg: DataView): number;
  xSectorSize(fileId: number): number;
  xDeviceCharacteristics(fileId: number): number;
  xOpen(name: string | null, fileId: number, flags: number, pOutFlags: DataView): number;
  xDelete(name: string, syncDir: number): number;
  xAccess(name: string, flags: number, pResOut: DataView): number;
}
const Base = VFS.Base as unknown as new () => VfsBase;

interface OpenFile {
  fd: number;
  path: string;
  flags: number;
}

let vfsCount = 0;

function isNotFound(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'ENOENT';
}

export class NodeFileVfs extends Base {
  /** Unique per instance: wa-sqlite refuses a second VFS with a name already registered. */
  readonly name = `lockstep-node-fs-${process.pid}-${++vfsCount}`;

  private readonly files = new Map<number, OpenFile>();

  /**
   * @param durable false: xSync does not flush to the disk. A killed process loses nothing that
   *   way (its writes are in the operating system's cache, where a reopen reads them), only a
   *   power cut or a kernel crash could; SQLite itself behaves exactly as with a flush. For tests
   *   of process crashes and throwaway databases, where a flush is waiting for nothing.
   */
  constructor(private readonly durable = true) {
    super();
  }

  /**
   * wa-sqlite 1.0's minified glue ignores mxPathName (it always allots 64 bytes), so databases
   * are opened under a short alias ("/db3") that this map turns back into the real path; SQLite
   * derives the journal's name ("/db3-journal") from the alias, so suffixes carry over.
   */
  private readonly aliases = new Map<string, string>();
  private aliasCount = 0;

  /** A short name to pass to sqlite3.open_v2 for the file at `path` (absolute). */
  alias(path: string): string {
    const alias = `/db${++this.aliasCount}`;
    this.aliases.set(alias, path);
    return alias;
  }

  private realPath(name: string): string {
    for (const [alias, path] of this.aliases) {
      if (name === alias) return path;
      if (name.startsWith(`${alias}-`)) return path + name.slice(alias.length);
    }
    return name;
  }

  override xOpen(name: string | null, fileId: number, flags: number, pOutFlags: DataView): number {
    const path = name === null ? join(tmpdir(), `lockstep-sqlite-${process.pid}-${Math.random().toString(36).slice(2)}`) : this.realPath(name);
    let mode = flags & VFS.SQLITE_OPEN_READWRITE ? constants.O_RDWR : constants.O_RDONLY;
    if (flags & VFS.SQLITE_OPEN_CREATE) mode |= constants.O_CREAT;
    if (flags & VFS.SQLITE_OPEN_EXCLUSIVE) mode |= constants.O_EXCL;
    try {
      const fd = openSync(path, mode, 0o644);
      this.files.set(fileId, { fd, path, flags });
    } catch {
      return VFS.SQLITE_CANTOPEN;
    }
    pOutFlags.setInt32(0, flags, true);
    return VFS.SQLITE_OK;
  }

  override xClose(fileId: number): number {
    const file = this.files.get(fileId);
    if (!file) return VFS.SQLITE_OK;
    this.files.delete(fileId);
    try {
      closeSync(file.fd);
      if (file.flags & VFS.SQLITE_OPEN_DELETEONCLOSE) unlinkSync(file.path);
      return VFS.SQLITE_OK;
    } catch {
      return VFS.SQLITE_IOERR_CLOSE;
    }
  }

  override xRead(fileId: number, pData: Uint8Array, iOffset: number): number {
    const file = this.files.get(fileId);
    if (!file) return VFS.SQLITE_IOERR_READ;
    let done = 0;
    try {
      while (done < pData.byteLength) {
        const n = readSync(file.fd, pData, done, pData.byteLength - done, iOffset + done);
        if (n === 0) break;
        done += n;
      }
    } catch {
      return VFS.SQLITE_IOERR_READ;
    }
    if (done < pData.byteLength) {
      // SQLite requires the unread tail zeroed on a short read.
      pData.fill(0, done);
      return VFS.SQLITE_IOERR_SHORT_READ;
    }
    return VFS.SQLITE_OK;
  }

  override xWrite(fileId: number, pData: Uint8Array, iOffset: number): number {
    const file = this.files.get(fileId);
    if (!file) return VFS.SQLITE_IOERR_WRITE;
    try {
      let done = 0;
      while (done < pData.byteLength) done += writeSync(file.fd, pData, done, pData.byteLength - done, iOffset + done);
      return VFS.SQLITE_OK;
    } catch {
      return VFS.SQLITE_IOERR_WRITE;
    }
  }

  override xTruncate(fileId: number, iSize: number): number {
    const file = this.files.get(fileId);
    if (!file) return VFS.SQLITE_IOERR_TRUNCATE;
    try {
      ftruncateSync(file.fd, iSize);
      return VFS.SQLITE_OK;
    } catch {
      return VFS.SQLITE_IOERR_TRUNCATE;
    }
  }

  override xSync(fileId: number, flags: number): number {
    const file = this.files.get(fileId);
    if (!file) return VFS.SQLITE_IOERR_FSYNC;
    if (!this.durable) return VFS.SQLITE_OK;
    try {
      if (flags & VFS.SQLITE_SYNC_DATAONLY) fdatasyncSync(file.fd);
      else fsyncSync(file.fd);
      return VFS.SQLITE_OK;
    } catch {
      return VFS.SQLITE_IOERR_FSYNC;
    }
  }

  override xFileSize(fileId: number, pSize64: DataView): number {
    const file = this.files.get(fileId);
    if (!file) return VFS.SQLITE_IOERR_FSTAT;
    try {
      pSize64.setBigInt64(0, BigInt(fstatSync(file.fd).size), true);
      return VFS.SQLITE_OK;
    } catch {
      return VFS.SQLITE_IOERR_FSTAT;
    }
  }

  // syncDir (fsync of the directory after unlinking a journal) is skipped: the files live in
  // test and benchmark directories, where surviving a power cut is not the point.
  override xDelete(name: string, _syncDir: number): number {
    try {
      unlinkSync(this.realPath(name));
      return VFS.SQLITE_OK;
    } catch (error) {
      return isNotFound(error) ? VFS.SQLITE_IOERR_DELETE_NOENT : VFS.SQLITE_IOERR_DELETE;
    }
  }

  override xAccess(name: string, flags: number, pResOut: DataView): number {
    const path = this.realPath(name);
    let ok = 1;
    if (flags === VFS.SQLITE_ACCESS_EXISTS) {
      // SQLite asks whether a hot journal exists at the start of every read transaction, which
      // without locks is every statement outside a transaction: existsSync answers without the
      // error accessSync throws for the usual answer, no (that error was 5% of the CPU of the
      // crash suite's syncs).
      ok = existsSync(path) ? 1 : 0;
    } else {
      const mode = flags === VFS.SQLITE_ACCESS_READWRITE ? constants.R_OK | constants.W_OK : constants.R_OK;
      try {
        accessSync(path, mode);
      } catch {
        ok = 0;
      }
    }
    pResOut.setInt32(0, ok, true);
    return VFS.SQLITE_OK;
  }
}
