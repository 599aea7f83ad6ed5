// Which headless Chromium the browser tests (test/browser) drive, and how it is launched: one place,
// so `npm ci && npm test` passes on a fresh machine with nothing installed by hand (issue 19).
//
// - "system": Debian's chromium at /usr/bin/chromium, when the machine has it (no unpacking).
// - "bundled": the Chromium (headless shell) that the pinned devDependency @sparticuz/chromium ships
//   inside its npm tarball, brotli-compressed. It is unpacked once per install into
//   node_modules/.cache (so `npm ci` starts it afresh) and needs only libc, libexpat, libnss3 and
//   libnspr4 from the machine, which a Debian 12 base system has.
//
// DOJANG_TEST_BROWSER picks: unset or "auto" (system when present, else bundled), "system", "bundled".
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createBrotliDecompress } from "node:zlib";
import { chromium, type Browser } from "playwright-core";
import { REPO_ROOT } from "./process.js";

export const SYSTEM_CHROMIUM = "/usr/bin/chromium";
export const BROWSER_ENV = "DOJANG_TEST_BROWSER";
const BUNDLED_PACKAGE = "@sparticuz/chromium";
const LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"];

export type BrowserSource = "system" | "bundled";

/** Which browser DOJANG_TEST_BROWSER (or, unset, the machine) asks for. */
export function chosenBrowser(value: string | undefined = process.env[BROWSER_ENV]): BrowserSource {
  switch (value ?? "") {
    case "":
    case "auto":
      return existsSync(SYSTEM_CHROMIUM) ? "system" : "bundled";
    case "system":
      return "system";
    case "bundled":
      return "bundled";
    default:
      throw new Error(`${BROWSER_ENV}=${JSON.stringify(value)}: expected "auto" (or unset), "system" (${SYSTEM_CHROMIUM}) or "bundled" (${BUNDLED_PACKAGE})`);
  }
}

/** The installed @sparticuz/chromium: its folder and version. */
export function bundledPackage(): { dir: string; version: string } {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(BUNDLED_PACKAGE);
  } catch (err) {
    throw new Error(`${BUNDLED_PACKAGE} is not installed (it is a devDependency: run npm ci): ${(err as Error).message}`);
  }
  const dir = dirname(dirname(entry)); // <package>/build/index.js
  const { version } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string };
  return { dir, version };
}

/**
 * The bundled Chromium's executable, unpacked on first use. Each process unpacks into a file of
 * its own and renames it into place, so concurrent test files never see a half-written binary.
 */
export async function bundledChromium(): Promise<string> {
  const { dir, version } = bundledPackage();
  const outDir = join(REPO_ROOT, "node_modules", ".cache", `dojang-test-chromium-${version}`);
  const exe = join(outDir, "chromium");
  if (existsSync(exe)) return exe;
  mkdirSync(outDir, { recursive: true });
  const partial = `${exe}.partial-${process.pid}`;
  try {
    await pipeline(createReadStream(join(dir, "bin", "chromium.br")), createBrotliDecompress(), createWriteStream(partial, { mode: 0o755 }));
    renameSync(partial, exe);
  } catch (err) {
    rmSync(partial, { force: true });
    throw new Error(`could not unpack ${BUNDLED_PACKAGE} ${version}'s chromium into ${outDir}: ${(err as Error).message}`);
  }
  return exe;
}

export interface LaunchedBrowser {
  readonly browser: Browser;
  readonly source: BrowserSource;
  readonly executablePath: string;
}

/** Headless Chromium, driven by playwright-core (which downloads nothing: executablePath is set). */
export async function launchChromium(source: BrowserSource = chosenBrowser()): Promise<LaunchedBrowser> {
  let executablePath: string;
  let hint: string;
  if (source === "system") {
    if (!existsSync(SYSTEM_CHROMIUM)) {
      throw new Error(`${BROWSER_ENV}=system but ${SYSTEM_CHROMIUM} is not there (apt-get install -y chromium, or unset ${BROWSER_ENV} to use the bundled one)`);
    }
    executablePath = SYSTEM_CHROMIUM;
    hint = "Debian's chromium";
  } else {
    executablePath = await bundledChromium();
    hint = `${BUNDLED_PACKAGE} ${bundledPackage().version}'s chromium; it needs libnss3 and libnspr4 (apt-get install -y libnss3)`;
  }
  try {
    const browser = await chromium.launch({ executablePath, headless: true, args: LAUNCH_ARGS, timeout: 20_000 });
    return { browser, source, executablePath };
  } catch (err) {
    throw new Error(`headless Chromium did not start (${source}: ${hint}; ${BROWSER_ENV} picks system or bundled): ${(err as Error).message}`);
  }
}
