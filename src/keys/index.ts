export { type IpOptions, MAX_IP_LENGTH, normalizeIp } from './ip.js';
export { accountKey, endpointKey, ipKey, MAX_KEY_BYTES, validateKey } from './key.js';
