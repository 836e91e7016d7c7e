// Use with: NODE_OPTIONS="--import /abs/path/node20-compat/register.mjs"  (no-op on Node >= 22)
import { register } from "node:module";
import fs from "node:fs";
if (typeof fs.globSync !== "function") register("./hooks.mjs", import.meta.url);
