// kafkajs 2.2 against a broker: create a topic, produce keyed records with headers (gzip),
// consume them in a consumer group from the beginning, commit, and print what was read as JSON.
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, count] = [process.argv[2], process.argv[3], Number(process.argv[4])];
  const kafka = new Kafka({ clientId: "kafkajs-interop", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) {
    messages.push({ key: `k${i % 5}`, value: `v${i}`, headers: { n: `${i}` }, timestamp: `${1700000000000 + i}` });
  }
  const sent = await producer.send({ topic, messages, acks: -1, compression: CompressionTypes.GZIP });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: "kafkajs-group", sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${count} records arrived`)), 30000);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push({ partition, offset: Number(message.offset), key: message.key.toString(),
                   value: message.value.toString(), n: message.headers.n.toString(),
                   timestamp: Number(message.timestamp) });
        if (got.length === count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  const committed = await admin.fetchOffsets({ groupId: "kafkajs-group", topics: [topic] });
  await admin.disconnect();
  console.log(JSON.stringify({ sent, got, committed }));
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
