// node-redisson (the npm package: Redisson's RLock layout in Node.js) driven
// by the interop suite. One command per run; it prints one line per event,
// with the milliseconds since it started, so the C side can follow it.
//
//   node node_peer.js PORT try NAME          -> "busy" or "acquired" (+unlock)
//   node node_peer.js PORT wait NAME BUDGET  -> "waiting", "subscribed" (each
//                                               wait), then "acquired MS" or
//                                               "timeout"; unlocks, exits
//   node node_peer.js PORT hold NAME LEASE   -> "held", then waits for a line
//                                               on stdin, unlocks: "released"
'use strict';
const { Redisson } = require('node-redisson');

const [port, cmd, name, arg] = process.argv.slice(2);
const start = Date.now();
const say = (line) => process.stdout.write(line + '\n');

async function main() {
  const redisson = new Redisson({
    redis: { options: { host: '127.0.0.1', port: Number(port) } },
  });
  const lock = redisson.getLock(name);
  // Say when a wait is ready for its message: node-redisson registers its
  // listener only after SUBSCRIBE's reply, so "the server counts a
  // subscriber" comes too early for the test to publish.
  const executor = redisson.commandExecutor;
  const subscribeOnce = executor.subscribeOnce.bind(executor);
  executor.subscribeOnce = async (channel, listener) => {
    await subscribeOnce(channel, listener);
    say('subscribed');
  };
  try {
    if (cmd === 'try') {
      const got = await lock.tryLock(0, 10000);
      say(got ? 'acquired' : 'busy');
      if (got) await lock.unlock();
    } else if (cmd === 'wait') {
      say('waiting');
      const got = await lock.tryLock(Number(arg), 10000);
      say(got ? `acquired ${Date.now() - start}` : 'timeout');
      if (got) await lock.unlock();
    } else if (cmd === 'hold') {
      const got = await lock.tryLock(0, Number(arg));
      say(got ? 'held' : 'busy');
      if (got) {
        await new Promise((resolve) => process.stdin.once('data', resolve));
        await lock.unlock();
        say('released');
      }
    } else {
      say(`unknown command ${cmd}`);
      process.exitCode = 2;
    }
  } finally {
    await redisson.quit();
  }
}

// Exit as soon as the command is done: node-redisson leaves a wait's timer
// armed after a message woke it, and that timer would fire on the closed
// connection (an unhandled rejection) after quit().
main().then(
  () => process.exit(process.exitCode || 0),
  (e) => {
    say(`error ${e && e.message}`);
    process.exit(1);
  });
