// kafkajs 2.2 over a secured listener: produce records and read them back in a consumer group,
// or, with a wrong password, report the error kafkajs raised. Settings come as one JSON argument:
// {bootstrap, topic, count, ca (PEM path or null), mechanism (null for none), username, password}.
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

function client(s) {
  const conf = { clientId: "kafkajs-secure", brokers: [s.bootstrap], logLevel: logLevel.NOTHING,
                 retry: { retries: s.retries } };
  if (s.ca) conf.ssl = { ca: [fs.readFileSync(s.ca, "utf-8")] };
  if (s.mechanism) {
    conf.sasl = { mechanism: s.mechanism.toLowerCase(), username: s.username, password: s.password };
  }
  return new Kafka(conf);
}

async function roundtrip(kafka, s) {
  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < s.count; i++) messages.push({ key: `k${i}`, value: `v${i}` });
  await producer.send({ topic: s.topic, messages, acks: -1 });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `g-${s.topic}`, sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic: s.topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${s.count} records arrived`)), 60000);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length === s.count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  return { got };
}

async function main() {
  const s = JSON.parse(process.argv[2]);
  const kafka = client(s);
  if (!s.expectFailure) return roundtrip(kafka, s);
  const admin = kafka.admin();
  try {
    await admin.connect();
    await admin.listTopics();
    return { error: null };
  } catch (e) {
    return { error: e.name, message: e.message };
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

main().then((out) => { console.log(JSON.stringify(out)); process.exit(0); })
      .catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
