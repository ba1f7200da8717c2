// kafkajs 2.2 transactions against a broker: a committed transaction, an aborted one, and one
// that commits consumer offsets with it (sendOffsets); then a read_committed consumer (kafkajs'
// default) reads the topic from the beginning. Prints what it read and the group's offsets.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = [process.argv[2], process.argv[3]];
  const kafka = new Kafka({ clientId: "kafkajs-txn", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  const producer = kafka.producer({ transactionalId: `${topic}-txn`, idempotent: true,
                                    maxInFlightRequests: 1 });
  await producer.connect();
  const plan = [["c", "commit"], ["a", "abort"], ["d", "offsets"]];
  for (const [prefix, end] of plan) {
    const txn = await producer.transaction();
    await txn.send({ topic, messages: [0, 1, 2].map((i) => ({ value: `${prefix}${i}` })) });
    if (end === "offsets") {
      await txn.sendOffsets({ consumerGroupId: `${topic}-group`,
                              topics: [{ topic, partitions: [{ partition: 0, offset: "42" }] }] });
    }
    await (end === "abort" ? txn.abort() : txn.commit());
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `${topic}-reader`, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length} records arrived`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length >= 6) { setTimeout(() => { clearTimeout(timer); resolve(); }, 2000); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  const committed = await admin.fetchOffsets({ groupId: `${topic}-group`, topics: [topic] });
  await admin.disconnect();
  console.log(JSON.stringify({ got, committed }));
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
