// kafkajs 2.2's partition reassignment calls against a broker: reassign a partition to the
// replica it has, then to a broker that does not exist (refused), and list what is under way;
// print what was answered as JSON.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = [process.argv[2], process.argv[3]];
  const kafka = new Kafka({ clientId: "kafkajs-reassign", brokers: [bootstrap], logLevel: logLevel.NOTHING,
                            retry: { retries: 2 } });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  const reassign = (replicas) => admin.alterPartitionReassignments(
    { topics: [{ topic, partitionAssignment: [{ partition: 0, replicas }] }] });
  await reassign([1]);
  let refused = null;
  try {
    await reassign([1, 9]);
  } catch (e) {
    refused = (e.errors && e.errors.length ? e.errors[0].type : e.type) || e.name;
  }
  const listed = await admin.listPartitionReassignments({ topics: [{ topic, partitions: [0] }] });
  await admin.disconnect();
  console.log(JSON.stringify({ refused, listed }));
}

main().catch((e) => { console.error(e); process.exit(1); });
