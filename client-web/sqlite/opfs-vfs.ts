/**
 * wa-sqlite's AccessHandlePoolVFS with its writes combined: contiguous writes to one file are
 * gathered and reach the sync access handle as one `write()` call. SQLite writes a WAL frame as
 * two calls (its header, then the page) and a rollback journal record as three, one page at a
 * time; a one-row commit is a dozen calls and a 20,000-row hydration thousands. When OPFS is in
 * memory (a private window, a browser context without a profile) every call is a message to the
 * browser process, 0.1-1.5 ms each on a loaded machine: a one-row commit took 10-25 ms and the
 * hydration's apply seconds, in calls alone. Gathered, a commit's frames are one call.
 *
 * Durability is SQLite's own, unchanged: the gathered bytes of a file reach it, in order, before
 * anything that could observe or depend on them: before its `xSync` (so a COMMIT that returned has
 * its bytes flushed), before any read, size, truncate or close of that file, before a write
 * elsewhere in it, at the end of every transaction (SQLITE_FCNTL_COMMIT_PHASETWO, which SQLite
 * sends after a commit in every journal mode), and when a file's gathered bytes reach
 * `COMBINED_WRITE_BYTES_MAX`. SQLite assumes that bytes not yet synced may be lost in a crash,
 * so holding them a little longer in memory changes nothing it relies on.
 *
 * The WAL's bytes are also kept in memory as they are written (up to `WAL_MIRROR_BYTES_MAX`) and
 * its reads answered from there: a checkpoint reads back every frame it copies into the database,
 * one call per page, and in a 20,000-row hydration those reads (700 per checkpoint, 0.25 ms each
 * with OPFS in memory) were most of its time. The copy is what was written, so a read answers the
 * same bytes; it holds only a prefix of the file this connection wrote itself (SQLite rewrites
 * the WAL from its start after a checkpoint), so a WAL found on open is read from the file.
 */
import * as VFS from 'wa-sqlite/src/VFS.js';
import { AccessHandlePoolVFS } from 'wa-sqlite/src/examples/AccessHandlePoolVFS.js';

/** Gathered bytes of one file are written once they reach this (bounds the memory a hydration holds). */
const COMBINED_WRITE_BYTES_MAX = 4 * 1024 * 1024;
/** The WAL is answered from memory up to this size (see above). */
const WAL_MIRROR_BYTES_MAX = 8 * 1024 * 1024;
/** https://sqlite.org/c3ref/c_open_autoproxy.html */
const SQLITE_OPEN_WAL = 0x00080000;
/** https://sqlite.org/c3ref/c_fcntl_begin_atomic_write.html */
const SQLITE_FCNTL_COMMIT_PHASETWO = 22;

/** The bytes of a WAL this connection wrote from offset 0: `bytes[0, size)` equal the file's. */
interface Mirror {
  bytes: Uint8Array;
  size: number;
}

interface Pending {
  readonly offset: number;
  readonly parts: Uint8Array[];
  bytes: number;
}

/** https://sqlite.org/c3ref/c_sync_dataonly.html */
const SQLITE_SYNC_NORMAL = 0x2;

/** The pool VFS with contiguous writes combined (see above). */
export class CombiningAccessHandlePoolVFS extends AccessHandlePoolVFS {
  readonly #pending = new Map<number, Pending>();
  readonly #open = new Set<number>();
  readonly #mirrors = new Map<number, Mirror>();

  /**
   * Writes what every open file gathered and flushes each (fsync on a disk-backed OPFS): what
   * the adapter calls shortly after commits when SQLite itself does not flush at COMMIT (WAL with
   * synchronous = NORMAL, see opfs.ts). A failure is logged: the next checkpoint flushes anyway.
   */
  flushFiles(): void {
    for (const fileId of [...this.#open]) {
      const rc = this.#flush(fileId);
      if (rc !== VFS.SQLITE_OK || super.xSync(fileId, SQLITE_SYNC_NORMAL) !== VFS.SQLITE_OK) console.error('lockstep: an OPFS flush failed');
    }
  }

  override xOpen(name: string | null, fileId: number, flags: number, pOutFlags: DataView): number {
    const rc = super.xOpen(name, fileId, flags, pOutFlags);
    if (rc === VFS.SQLITE_OK) this.#open.add(fileId);
    if (rc === VFS.SQLITE_OK && (flags & SQLITE_OPEN_WAL) !== 0) this.#mirrors.set(fileId, { bytes: new Uint8Array(64 * 1024), size: 0 });
    return rc;
  }

  /** Writes what `fileId` has gathered; a failure is SQLite's I/O error for the call that asked. */
  #flush(fileId: number): number {
    const pending = this.#pending.get(fileId);
    if (!pending) return VFS.SQLITE_OK;
    this.#pending.delete(fileId);
    let data: Uint8Array;
    if (pending.parts.length === 1) data = pending.parts[0] as Uint8Array;
    else {
      data = new Uint8Array(pending.bytes);
      let at = 0;
      for (const part of pending.parts) {
        data.set(part, at);
        at += part.byteLength;
      }
    }
    let rc: number;
    try {
      rc = super.xWrite(fileId, data, pending.offset);
    } catch (error) {
      console.error('lockstep: an OPFS write failed', error);
      rc = VFS.SQLITE_IOERR;
    }
    // The file may not hold what the copy of the WAL says: read it from the file from now on.
    const mirror = this.#mirrors.get(fileId);
    if (rc !== VFS.SQLITE_OK && mirror) mirror.size = Math.min(mirror.size, pending.offset);
    return rc;
  }

  #flushAll(): number {
    let rc: number = VFS.SQLITE_OK;
    for (const fileId of [...this.#pending.keys()]) {
      const result = this.#flush(fileId);
      if (rc === VFS.SQLITE_OK) rc = result;
    }
    return rc;
  }

  /** Keeps a write in the WAL's copy when it extends or overwrites the copied prefix. */
  #mirrorWrite(fileId: number, pData: Uint8Array, iOffset: number): void {
    const mirror = this.#mirrors.get(fileId);
    if (!mirror || iOffset > mirror.size) return;
    const end = iOffset + pData.byteLength;
    if (end > WAL_MIRROR_BYTES_MAX) {
      // Past the copy's limit: the prefix up to here is still the file's.
      mirror.size = iOffset;
      return;
    }
    if (end > mirror.bytes.byteLength) {
      const grown = new Uint8Array(Math.min(WAL_MIRROR_BYTES_MAX, Math.max(end, mirror.bytes.byteLength * 2)));
      grown.set(mirror.bytes.subarray(0, mirror.size));
      mirror.bytes = grown;
    }
    mirror.bytes.set(pData, iOffset);
    mirror.size = Math.max(mirror.size, end);
  }

  override xWrite(fileId: number, pData: Uint8Array, iOffset: number): number {
    this.#mirrorWrite(fileId, pData, iOffset);
    const pending = this.#pending.get(fileId);
    if (pending && iOffset === pending.offset + pending.bytes && pending.bytes + pData.byteLength <= COMBINED_WRITE_BYTES_MAX) {
      // A view into wasm memory, which SQLite reuses: keep a copy.
      pending.parts.push(pData.slice());
      pending.bytes += pData.byteLength;
      return VFS.SQLITE_OK;
    }
    const rc = this.#flush(fileId);
    if (rc !== VFS.SQLITE_OK) return rc;
    this.#pending.set(fileId, { offset: iOffset, parts: [pData.slice()], bytes: pData.byteLength });
    return VFS.SQLITE_OK;
  }

  override xRead(fileId: number, pData: Uint8Array, iOffset: number): number {
    const mirror = this.#mirrors.get(fileId);
    if (mirror && iOffset + pData.byteLength <= mirror.size) {
      pData.set(mirror.bytes.subarray(iOffset, iOffset + pData.byteLength));
      return VFS.SQLITE_OK;
    }
    const rc = this.#flush(fileId);
    return rc === VFS.SQLITE_OK ? super.xRead(fileId, pData, iOffset) : rc;
  }

  override xSync(fileId: number, flags: number): number {
    const rc = this.#flush(fileId);
    return rc === VFS.SQLITE_OK ? super.xSync(fileId, flags) : rc;
  }

  override xTruncate(fileId: number, iSize: number): number {
    const mirror = this.#mirrors.get(fileId);
    if (mirror) mirror.size = Math.min(mirror.size, iSize);
    const rc = this.#flush(fileId);
    return rc === VFS.SQLITE_OK ? super.xTruncate(fileId, iSize) : rc;
  }

  override xFileSize(fileId: number, pSize64: DataView): number {
    const rc = this.#flush(fileId);
    return rc === VFS.SQLITE_OK ? super.xFileSize(fileId, pSize64) : rc;
  }

  override xClose(fileId: number): number {
    this.#open.delete(fileId);
    this.#mirrors.delete(fileId);
    const rc = this.#flush(fileId);
    const closed = super.xClose(fileId);
    return rc === VFS.SQLITE_OK ? closed : rc;
  }

  override xFileControl(fileId: number, op: number, pArg: DataView): number {
    if (op === SQLITE_FCNTL_COMMIT_PHASETWO) {
      const rc = this.#flushAll();
      if (rc !== VFS.SQLITE_OK) return rc;
    }
    return super.xFileControl(fileId, op, pArg);
  }

  override async close(): Promise<void> {
    this.#flushAll();
    await super.close();
  }
}
