// Shared test helpers for the fault filter: parse-or-fail and call facts.
import { expect } from "vitest";
import { formatFaultRule, parseFaultAction, parseFaultRule, parsePercentage, type CallFacts, type FaultRule, type FaultSource } from "../../../../src/proxy/filters/fault/index.js";
import type { FaultParsers } from "../../../../src/config/parsers.js";

/** The config's fault parsers, which the API, FaultSet.update and header faults take as an argument. */
export const parsers: FaultParsers = { parseFaultRule, formatFaultRule, parseFaultAction, parsePercentage };

/** Parses a rule that must be valid; fails the test with the issues otherwise. */
export function rule(value: unknown, source: FaultSource = "config"): FaultRule {
  const r = parseFaultRule(value, "", { source });
  if (!r.ok) expect.fail(`expected a valid rule, got ${JSON.stringify(r.issues)}`);
  return r.rule;
}

/** Facts for a call to /pkg.Svc/Get on route 0 ("prefix:/"), no metadata, at time 0. */
export function facts(overrides: Partial<CallFacts> & { headers?: Record<string, string> } = {}): CallFacts {
  const { headers, ...rest } = overrides;
  const h = headers ?? {};
  return {
    routeLabel: "prefix:/",
    routeIndex: 0,
    service: "pkg.Svc",
    method: "Get",
    metadata: (name) => h[name],
    nowMs: 0,
    ...rest,
  };
}
