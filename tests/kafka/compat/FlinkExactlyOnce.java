/*
 * Flink 1.20's KafkaSink with DeliveryGuarantee.EXACTLY_ONCE (flink-connector-kafka 3.4.0-1.20,
 * kafka-clients 3.4.0), as tests/kafka/test_flink.py runs it against oncelog and Apache Kafka: a
 * local MiniCluster job writing "v<i>" for i in 0..records-1 to one topic through Flink's
 * two-phase-commit sink, checkpointing every --checkpoint-ms, retained checkpoints in --checkpoints.
 *
 *   FlinkExactlyOnce --bootstrap H:P --topic T --records N --checkpoints DIR --txn-prefix P
 *                    [--fail-at K --marker F] [--restore CHK_DIR] [--pace-ms MS]
 *
 * --fail-at K: the map throws once when it sees K (the marker file F makes it once across
 * restarts); Flink restarts the job from its last checkpoint (fixed-delay restart strategy) and
 * the sink aborts what the failed attempt left open.
 * --restore DIR: start from a retained checkpoint (the test SIGKILLed the previous JVM): the sink
 * commits the transactions that checkpoint recorded (commit on restore, through kafka-clients'
 * internals: resumeTransaction) and aborts lingering ones.
 * Prints {"finished": true} when the job ends.
 */

import java.io.File;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.restartstrategy.RestartStrategies;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.streaming.api.CheckpointingMode;
import org.apache.flink.streaming.api.environment.CheckpointConfig;
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

        Configuration conf = new Configuration();
        conf.setString("state.checkpoints.dir", new File(args.get("checkpoints")).toURI().toString());
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.setString("state.checkpoints.num-retained", "3");
        if (args.containsKey("restore")) {
            conf.setString("execution.savepoint.path", new File(args.get("restore")).toURI().toString());
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.enableCheckpointing(Long.parseLong(args.getOrDefault("checkpoint-ms", "500")), CheckpointingMode.EXACTLY_ONCE);
        env.getCheckpointConfig().setExternalizedCheckpointCleanup(
                CheckpointConfig.ExternalizedCheckpointCleanup.RETAIN_ON_CANCELLATION);
        env.setRestartStrategy(RestartStrategies.fixedDelayRestart(3, 500));

        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(args.get("bootstrap"))
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(args.get("topic"))
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(args.get("txn-prefix"))
                .setProperty("transaction.timeout.ms", "60000")
                .build();

        env.fromSequence(0, records - 1)
                .map(new Pace(paceMs, failAt, marker))
                .sinkTo(sink);
        env.execute("oncelog exactly-once");
        System.out.println("{\"finished\": true}");
        System.out.flush();
        System.exit(0);
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
