// `watchConfig: true`: the config file watched for changes (the CLI and the cluster primary reload
// on one). Reads the file and its directory's events; decides nothing about the config itself.
import { readFileSync, watch } from "node:fs";
import { dirname, resolve } from "node:path";

/** Where a watch that failed is said (a pino Logger is one). */
export interface WatchLog {
  warn(obj: object, msg: string): void;
}

/**
 * `watchConfig: true` (CLI): reload when the config file changes. fs.watch on the file's
 * directory, not the file: editors that save by writing a new file and renaming it over the
 * old one (vim, many IDEs), and Kubernetes' ConfigMap volumes (a symlink swap of `..data`),
 * replace the inode a file watch is bound to. Any event in the directory arms one debounce
 * timer; when it fires the file is read and compared with the text last seen, so only a real
 * change calls `onChange` (with the text), once, however many events the save made (a file
 * missing mid-rename waits for the next event). The caller skips a text a SIGHUP or POST
 * /reload has applied already.
 */
export function watchConfigFile(file: string, onChange: (text: string) => void, log: WatchLog, debounceMs = 200): { close(): void } {
  const read = (): string | undefined => {
    try {
      return readFileSync(file, "utf8");
    } catch {
      return undefined;
    }
  };
  let last = read();
  let timer: NodeJS.Timeout | undefined;
  const check = (): void => {
    timer = undefined;
    const text = read();
    if (text === undefined || text === last) return;
    last = text;
    onChange(text);
  };
  const w = watch(dirname(resolve(file)), { persistent: false }, () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(check, debounceMs);
  });
  w.on("error", (err) => log.warn({ file, err: err.message }, "watchConfig: watching the config file's directory failed; SIGHUP and POST /reload still reload"));
  return {
    close: () => {
      if (timer !== undefined) clearTimeout(timer);
      w.close();
    },
  };
}
