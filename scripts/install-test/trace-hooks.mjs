// Module hooks (node --import + module.register) for the install test: print every module of the
// libp2p stack loaded, which import('ratemesh') must not load (src/mesh/node.ts imports it on
// start()). One line per module: "LOADED <url>".
const STACK =
  /\/node_modules\/(libp2p|@libp2p\/(gossipsub|identify|tcp|pnet|utils)|@chainsafe\/libp2p-(noise|yamux))\//;
export async function load(url, context, next) {
  if (STACK.test(url)) process.stderr.write(`LOADED ${url}\n`);
  return next(url, context);
}
