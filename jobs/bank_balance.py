"""bank_balance: running balance per account, event sourcing with the log as the source of truth.

`bank.transactions` holds one record per transaction: key = account, value = JSON with a
signed `amount` (`{"id": 7, "amount": -120}`). The job folds them into a balance per account
and writes each changed balance to the compacted topic `bank.balances` (key = account, value =
JSON `{"account", "balance", "transactions"}`), so that topic always ends with every account's
current balance. The log is the source of truth: rerunning from scratch (a new checkpoint,
starting at the earliest offset) reproduces the same balances.

The aggregation runs in Spark's update output mode: each micro-batch writes only the accounts
it changed, through the batch sink (`write_each_batch`; Python streaming sinks take Append
and Complete modes only).
"""
import sys

from minilog.jobs.interrupts import CTRL_C

CTRL_C.install_for(__name__)  # first: Ctrl-C during the imports below is one line too

from minilog.datasource import write_each_batch  # noqa: E402
from minilog.jobs import pipeline  # noqa: E402

JOB = "bank_balance"
TRANSACTIONS, BALANCES = "bank.transactions", "bank.balances"


def balances(transactions):
    """The running balance of each account in a streaming DataFrame of transactions."""
    from pyspark.sql import functions as F
    amount = F.get_json_object(F.col("value").cast("string"), "$.amount").cast("long")
    return (transactions
            .select(F.col("key").cast("string").alias("account"), amount.alias("amount"))
            .groupBy("account")
            .agg(F.sum("amount").alias("balance"), F.count("*").alias("transactions"))
            .select(F.col("account").alias("key"),
                    F.to_json(F.struct("account", "balance", "transactions")).alias("value")))


def parse(argv):
    return pipeline.parser("bank_balance", __doc__.splitlines()[0], {
        "transactions": TRANSACTIONS, "balances": BALANCES}).parse_args(argv)


def start(spark, args):
    """Start the balances query; the running StreamingQuery."""
    out = balances(pipeline.read_topic(spark, args, args.transactions_topic, JOB))
    writer = (out.writeStream.outputMode("update")
              .foreachBatch(write_each_batch({"kafka.bootstrap.servers": args.bootstrap_servers,
                                              "topic": args.balances_topic})))
    return pipeline.start(writer, args, spark, JOB, "balances")


def main(argv=None):
    args = parse(argv)
    return pipeline.run([start(pipeline.session(JOB), args)])


if __name__ == "__main__":
    sys.exit(main())
