// ESM resolve hook: `import ... from "fs"` (outside the shim itself) resolves to fs-shim.mjs.
const SHIM = new URL("./fs-shim.mjs", import.meta.url).href;
export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL !== SHIM) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
