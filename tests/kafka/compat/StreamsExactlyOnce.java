/*
 * A Kafka Streams application with processing.guarantee=exactly_once_v2, as
 * tests/kafka/test_kafka_streams.py runs it (two instances, one SIGKILLed) against oncelog and
 * Apache Kafka, compiled against each kafka-streams version tested (3.x and 4.4).
 *
 *   StreamsExactlyOnce --bootstrap H:P --app-id A --input IN --output OUT --state-dir DIR [--pace-ms MS]
 *                      [--guarantee exactly_once_v2|at_least_once] [--group-protocol classic|streams]
 *
 * Topology: IN's records carry a value "<key>:<n>" and no key; selectKey(<key>) makes Streams
 * write them through a repartition topic; groupByKey().count() keeps a changelog-backed store
 * (in memory: no native RocksDB); each new count goes to OUT as "<key>" -> "<count>". Under
 * exactly-once the committed OUT holds, per key, exactly 1, 2, ..., n: a duplicate or a gap is a
 * broken guarantee whatever the crash. --pace-ms sleeps per count, so that OUT grows steadily and
 * a kill lands mid-run. --group-protocol streams sets group.protocol=streams (KIP-1071, Kafka
 * Streams 4.1+: the broker assigns the tasks; the consumer's session and heartbeat settings are then
 * the group's, not set here); without it the classic protocol, as before. The application runs
 * until killed.
 */

import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

public class StreamsExactlyOnce {
    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        long paceMs = Long.parseLong(args.getOrDefault("pace-ms", "0"));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        // --guarantee at_least_once: the control, under which a kill shows duplicate counts
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.getOrDefault("guarantee", "exactly_once_v2"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state-dir"));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        String protocol = args.getOrDefault("group-protocol", "classic");
        if (protocol.equals("classic")) {
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
            p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        } else {
            p.put("group.protocol", protocol);  // a string: 3.x's StreamsConfig has no constant for it
        }
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "10000");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");  // every count is sent, not only the last
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());

        StreamsBuilder b = new StreamsBuilder();
        b.stream(args.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
                .selectKey((k, v) -> v.substring(0, v.indexOf(':')))
                .groupByKey()
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream()
                // The pace is on the counting side, the one that writes OUT: paced before the
                // repartition topic instead, OUT once jumped from a sixth to all of it between two
                // looks of the test (the count caught up with a repartition backlog at full speed).
                .peek((k, v) -> {
                    if (paceMs > 0) {
                        try {
                            Thread.sleep(paceMs);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                })
                .mapValues(String::valueOf)
                .to(args.get("output"), Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("{\"state\": \"" + now + "\"}");
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        stopped.await();
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
