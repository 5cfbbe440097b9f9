/**
 * The check `@libp2p/pnet`'s `preSharedKey({ psk })` makes of a swarm key when it is built
 * (its decodeV1PSK), made here without loading pnet: option validation is synchronous and pnet's
 * module graph (it pulls in @libp2p/utils) is part of the libp2p stack that src/mesh/node.ts
 * loads on start(). The key's lines are split on any line ending; the third must decode as
 * base16 (either case, `=` padding tolerated) to exactly 32 bytes; the tag and codec lines are
 * not checked, as pnet does not. test/mesh/lazy-stack.test.ts holds it to pnet's own answer.
 */
const KEY_LINE = /^[0-9a-fA-F]{64}=*$/;

/** Undefined when pnet would accept `psk`, else why not (pnet's own message). */
export function swarmKeyProblem(psk: Uint8Array): string | undefined {
  const lines = new TextDecoder().decode(psk).split(/(?:\r\n|\r|\n)/g);
  return KEY_LINE.test(lines[2] ?? '') ? undefined : 'Your private shared key is invalid';
}
