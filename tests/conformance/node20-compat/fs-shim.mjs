// 'fs' as seen by other modules: everything of node:fs plus a minimal globSync (Node >= 22 API).
import fs from "node:fs";
import path from "node:path";
export * from "node:fs";
export default fs;
export function globSync(pattern, opts = {}) {
  if (typeof fs.globSync === "function") return fs.globSync(pattern, opts);
  // minimal fallback: "name" or "**/name" (what the conformance CLI's tier-check uses)
  const cwd = opts.cwd ? String(opts.cwd) : process.cwd();
  const recursive = String(pattern).startsWith("**/");
  const base = String(pattern).replace(/^\*\*\//, "");
  const out = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(cwd, rel), { withFileTypes: true })) {
      const r = rel ? path.join(rel, e.name) : e.name;
      if (e.isDirectory()) { if (recursive) walk(r); } else if (e.name === base) out.push(r);
    }
  };
  walk("");
  return out;
}
