// A CommonJS consumer: require() of the ESM package (Node >= 20.19 and >= 22.12).
const rm = require('ratemesh');
const { rateMeshExpress } = require('ratemesh/express');
if (typeof rm.createMeshLimiter !== 'function' || typeof rateMeshExpress !== 'function') {
  console.error('FAIL: require() gave', Object.keys(rm).length, 'exports');
  process.exit(1);
}
console.log(`ok   require('ratemesh') from CommonJS: ${Object.keys(rm).length} exports`);
