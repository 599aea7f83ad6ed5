// One instance's fault rules as its owner (src/proxy/dojang.ts) holds them: the one FaultSet
// every listener reads (rules carry their scope), the config's rules a reload replaces, the
// config's fault parsers (given, or loaded on first need so that a served process whose config
// has no fault rules never loads zod), the /faults admin API and the library's add and list.
import type { FaultRule } from "../../../config/faults/model.js";
import { loadFaultParsers, type FaultParsers } from "../../../config/parsers.js";
import type { Config } from "../../../config/schema.js";
import { DojangError } from "../../../errors.js";
import { handleFaultsApi, type FaultsApiResponse } from "./admin-api.js";
import { FaultSet, type FaultRuleStatus } from "./select.js";

export class FaultControl {
  /** every fault rule (config, API), one set for all listeners (rules carry their scope) */
  readonly set: FaultSet;
  /** the config's fault parsers: given, or loaded on first need (load()); null until then */
  private loaded: FaultParsers | null;

  /**
   * `onLoad`: told once the parsers are loaded (the owner builds every later snapshot with them);
   * `now`: the owner's monotonic clock in milliseconds (this file reads none itself: the fault
   * folder's rule side stays pure, test/proxy/filters/fault/actions.test.ts).
   */
  constructor(
    config: Config,
    parsers: FaultParsers | null,
    private readonly onLoad: (p: FaultParsers) => void,
    private readonly now: () => number,
  ) {
    this.set = new FaultSet(config.faultInjection);
    this.loadConfigRules(config);
    this.loaded = parsers;
  }

  /** The fault parsers, or null before they are given or loaded. */
  get parsers(): FaultParsers | null {
    return this.loaded;
  }

  /** Config rules (listener and route lists) into the set; a reload replaces only these. */
  loadConfigRules(config: Config): void {
    this.set.removeConfigRules();
    const now = this.now();
    for (const l of config.listeners) {
      for (const r of l.faults) this.set.add(r, now);
      for (const rt of l.routes) for (const r of rt.faults) this.set.add(r, now);
    }
  }

  /**
   * The fault parsers, loaded on the first call (a dynamic import) unless given or loaded already;
   * from then on every snapshot is built with them (header faults).
   */
  async load(): Promise<FaultParsers> {
    if (this.loaded === null) {
      const p = await loadFaultParsers();
      this.loaded = p;
      this.onLoad(p);
    }
    return this.loaded;
  }

  /**
   * The /faults admin API; null for a path not under /faults. Answered at once when the fault
   * parsers are there (a cluster worker replays the primary's changes in order, synchronously);
   * the first use without them loads them.
   */
  api(method: string, path: string, body: string): FaultsApiResponse | null | Promise<FaultsApiResponse | null> {
    const p = this.loaded;
    if (p !== null) return handleFaultsApi(method, path, body, this.set, this.now(), p);
    return this.load().then((q) => handleFaultsApi(method, path, body, this.set, this.now(), q));
  }

  /**
   * Library: add a rule given in the config/API shape; throws with the reasons when invalid, or
   * when the instance has no fault parsers (the library entry gives them; else start() with a
   * config that uses faults, or any /faults request, loads them).
   */
  add(value: unknown): FaultRule {
    if (this.loaded === null) throw new DojangError("DOJANG_ERR_FAULT", "the fault parsers are not loaded: construct Dojang with options.faultParsers (startDojang does)");
    const r = this.loaded.parseFaultRule(value, "fault", { source: "api" });
    if (!r.ok) throw new DojangError("DOJANG_ERR_FAULT", r.issues.map((i) => `${i.path}: ${i.message}`).join("; "));
    const a = this.set.add(r.rule, this.now());
    if (!a.ok) throw new DojangError("DOJANG_ERR_FAULT", a.message);
    return a.rule;
  }

  list(): FaultRuleStatus[] {
    return this.set.list();
  }
}
