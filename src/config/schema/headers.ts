// A route's header rules (src/proxy/filters/headers): `headers.request` and `headers.response`,
// each fields to add (set, replacing) and names to remove; the zod schema and each key's
// documentation (the JSON Schema's descriptions, config/json-schema.ts), written once, here.
import { z } from "zod";
import { RULE_FORBIDDEN, RULE_HEADER_RE } from "../types.js";
import { expected } from "./scalars.js";
import type { KeyDoc } from "./key-doc.js";

const ruleHeaderName = z
  .string({ error: expected("a header name") })
  .regex(RULE_HEADER_RE, "must be a lower-case header name (no pseudo-headers)")
  .refine((n) => !RULE_FORBIDDEN.has(n), "is owned by HTTP/2 or gRPC framing and cannot be changed by a rule");
const headerRuleSet = z
  .strictObject(
    {
      add: z.record(ruleHeaderName, z.string({ error: expected("a header value") })).default({}),
      remove: z.array(ruleHeaderName, { error: expected("a list of header names") }).default([]),
    },
    { error: expected("a mapping with add and remove") },
  )
  .default({ add: {}, remove: [] });
export const headerRules = z.strictObject({ request: headerRuleSet, response: headerRuleSet }, { error: expected("a mapping with request and response") });

/** The keys' documentation, by path (config/json-schema.ts KEYS). */
export const HEADER_RULES_KEYS: Readonly<Record<string, KeyDoc>> = {
  "listeners[].routes[].headers": { description: "Header rules: fields added (set, replacing) and removed on the request sent upstream and on the response head sent to the client. null = none.", default: null },
  "listeners[].routes[].headers.request": { description: "Rules for the request head every attempt starts from." },
  "listeners[].routes[].headers.response": { description: "Rules for the upstream's response head (and Trailers-Only answer) going to the client." },
  "listeners[].routes[].headers.request.add": { description: "name: value; set on the request, replacing the client's value.", default: {} },
  "listeners[].routes[].headers.request.remove": { description: "Names removed from the request.", default: [] },
  "listeners[].routes[].headers.request.remove[]": { description: "A lower-case header name." },
  "listeners[].routes[].headers.response.add": { description: "name: value; set on the response head.", default: {} },
  "listeners[].routes[].headers.response.remove": { description: "Names removed from the response head.", default: [] },
  "listeners[].routes[].headers.response.remove[]": { description: "A lower-case header name." },
};
