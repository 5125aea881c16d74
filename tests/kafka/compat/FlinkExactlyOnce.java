/*
 * Flink's KafkaSink with DeliveryGuarantee.EXACTLY_ONCE, as tests/kafka/test_flink.py runs it
 * against oncelog and Apache Kafka on Flink 1.20 (flink-connector-kafka 3.4.0-1.20, kafka-clients
 * 3.4.0) and Flink 2.2 (connector 5.0.0-2.2, kafka-clients 4.x) — one source for both: everything
 * that changed between them (restart strategies, checkpoint storage, the restore path) is set
 * through configuration keys, old and new names side by side. A local MiniCluster job writes
 * "v<i>" for i in 0..records-1 to one topic through Flink's two-phase-commit sink, checkpointing
 * every --checkpoint-ms, retained checkpoints in --checkpoints.
 *
 *   FlinkExactlyOnce --bootstrap H:P --topic T --records N --checkpoints DIR --txn-prefix P
 *                    [--fail-at K --marker F] [--restore CHK_DIR] [--pace-ms MS]
 *                    [--naming INCREMENTING|POOLING]
 *
 * --fail-at K: the map throws once when it sees K (the marker file F makes it once across
 * restarts); Flink restarts the job from its last checkpoint (fixed-delay restart strategy) and
 * the sink aborts what the failed attempt left open.
 * --restore DIR: start from a retained checkpoint (the test SIGKILLed the previous JVM): the sink
 * commits the transactions that checkpoint recorded (commit on restore, through kafka-clients'
 * internals: resumeTransaction) and aborts lingering ones.
 * --naming: the connector's TransactionNamingStrategy (connector 4.0+, set by reflection so the
 * source compiles against 3.4 too): INCREMENTING (the classic prefix-subtask-counter ids, aborted
 * by probing) or POOLING (a small pool of ids, lingering ones found with ListTransactions).
 * Prints {"finished": true} when the job ends.
 */

import java.io.File;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaSinkBuilder;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class FlinkExactlyOnce {
    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        long records = Long.parseLong(args.get("records"));
        long failAt = Long.parseLong(args.getOrDefault("fail-at", "-1"));
        String marker = args.getOrDefault("marker", "");
        long paceMs = Long.parseLong(args.getOrDefault("pace-ms", "2"));

        Map<String, String> conf = new HashMap<>();
        String dir = new File(args.get("checkpoints")).toURI().toString();
        set(conf, dir, "execution.checkpointing.dir", "state.checkpoints.dir");
        set(conf, "3", "execution.checkpointing.num-retained", "state.checkpoints.num-retained");
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.put("execution.checkpointing.interval", args.getOrDefault("checkpoint-ms", "500") + " ms");
        conf.put("execution.checkpointing.mode", "EXACTLY_ONCE");
        conf.put("restart-strategy.type", "fixed-delay");
        conf.put("restart-strategy.fixed-delay.attempts", "3");
        conf.put("restart-strategy.fixed-delay.delay", "500 ms");
        if (args.containsKey("restore")) {
            set(conf, new File(args.get("restore")).toURI().toString(),
                    "execution.state-recovery.path", "execution.savepoint.path");
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));
        env.setParallelism(2);

        KafkaSinkBuilder<String> builder = KafkaSink.<String>builder()
                .setBootstrapServers(args.get("bootstrap"))
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(args.get("topic"))
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(args.get("txn-prefix"))
                .setProperty("transaction.timeout.ms", "60000");
        if (args.containsKey("naming")) {
            namingStrategy(builder, args.get("naming"));
        }
        KafkaSink<String> sink = builder.build();
        env.fromSequence(0, records - 1)
                .map(new Pace(paceMs, failAt, marker))
                .sinkTo(sink);
        env.execute("oncelog exactly-once");
        System.out.println("{\"finished\": true}");
        System.out.flush();
        System.exit(0);
    }

    /** Both names of a renamed option (Flink 1.20 reads either, 2.x only the new one). */
    static void set(Map<String, String> conf, String value, String key, String oldKey) {
        conf.put(key, value);
        conf.put(oldKey, value);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void namingStrategy(KafkaSinkBuilder<String> builder, String name) throws Exception {
        Class strategy = Class.forName("org.apache.flink.connector.kafka.sink.TransactionNamingStrategy");
        builder.getClass().getMethod("setTransactionNamingStrategy", strategy)
                .invoke(builder, Enum.valueOf(strategy, name));
    }

    /** "v<i>", slowly enough that checkpoints fall inside the run; throws once at failAt. */
    static class Pace implements MapFunction<Long, String> {
        final long paceMs;
        final long failAt;
        final String marker;

        Pace(long paceMs, long failAt, String marker) {
            this.paceMs = paceMs;
            this.failAt = failAt;
            this.marker = marker;
        }

        @Override
        public String map(Long value) throws Exception {
            if (value == failAt && new File(marker).createNewFile()) {
                throw new IllegalStateException("injected failure at " + value);
            }
            if (paceMs > 0) {
                Thread.sleep(paceMs);
            }
            return "v" + value;
        }
    }
}
