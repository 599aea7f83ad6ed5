// Public surface of the fault filter: rule model, parsing, selection, header faults, the /faults API.

export * from "../../../config/faults/model.js";
export * from "../../../config/faults/parse.js";
export * from "./select.js";
export * from "./headers.js";
export * from "./admin-api.js";
export * from "./actions.js";
export * from "./prng.js";
export { FAULT_KINDS_DOC } from "./doc.js";
export type * from "./input.js";
