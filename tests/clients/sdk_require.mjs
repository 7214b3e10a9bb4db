// Finds the pinned TypeScript MCP SDK (@modelcontextprotocol/sdk) for the project's node test
// programs (tests/clients/ts_client.mjs, tests/conformance/target.mjs).
//
// The node_modules directory of the peers install (scripts/install-peers.sh DIR puts it in
// DIR/npm/node_modules) is taken from, in order:
//   1. env MCPMUX_PEERS_NPM  (path to .../npm/node_modules)
//   2. <repo>/target/peers/npm/node_modules, relative to this file
// sdkRequire() returns { nm, req }: that directory and a require() that resolves packages exactly
// as npm laid them out there (the SDK's CommonJS build, through its export map).

import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export function sdkRequire() {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [];
  if (process.env.MCPMUX_PEERS_NPM) candidates.push(resolve(process.env.MCPMUX_PEERS_NPM));
  candidates.push(resolve(here, "..", "..", "target", "peers", "npm", "node_modules"));
  const nm = candidates.find((d) => existsSync(join(d, "@modelcontextprotocol", "sdk", "package.json")));
  if (!nm) {
    throw new Error(
      `@modelcontextprotocol/sdk not found in any of: ${candidates.join(", ")} ` +
        "(run scripts/install-peers.sh, or set MCPMUX_PEERS_NPM=DIR/npm/node_modules)",
    );
  }
  // A require() anchored inside node_modules' parent resolves packages exactly as npm laid them out.
  return { nm, req: createRequire(join(nm, "..", "__mcpmux_resolver__.js")) };
}
