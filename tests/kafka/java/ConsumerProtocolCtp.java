/*
 * A consume-transform-produce member on the KIP-848 consumer group protocol, as a Kafka Streams
 * or a plain exactly-once application writes one with the Java client 4.x: a KafkaConsumer with
 * group.protocol=consumer and read_committed, a transactional producer, and per poll one
 * transaction that writes the records it read to the output topic and their offsets with
 * sendOffsetsToTransaction(offsets, consumer.groupMetadata()) — the group metadata carrying the
 * member id and member epoch, which the group coordinator checks (KIP-447 with member epochs).
 *
 * Usage: ConsumerProtocolCtp --bootstrap B --input T --output T --group G --transactional-id ID
 *        [--max-poll-records N] [--pace-ms MS] [--until-done true] [--timeout-ms MS]
 *
 * --pace-ms: a sleep inside each transaction, after its records are sent and before its offsets,
 * so a SIGKILL from the test lands mid-transaction.
 * --until-done: exit 0 once the group's committed offsets of every input partition are its end
 * offsets (the input is all committed beforehand; read_committed end offsets are its LSO).
 *
 * Prints one JSON line per committed transaction ({"txn":..,"records":..,"epoch":..}), one per
 * abort ({"aborted":..,"reason":..}), and {"end":true,...} at the end. A transaction refused for
 * a stale member epoch or a rebalance is aborted and the consumer rewound to the group's committed
 * offsets, as an application must; a fenced producer exits 3.
 */

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ConsumerProtocolCtp {

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String input = args.get("input");
        String output = args.get("output");
        long paceMs = Long.parseLong(args.getOrDefault("pace-ms", "0"));
        boolean untilDone = Boolean.parseBoolean(args.getOrDefault("until-done", "false"));
        long deadline = System.currentTimeMillis() + Long.parseLong(args.getOrDefault("timeout-ms", "120000"));

        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        c.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, args.getOrDefault("max-poll-records", "5"));
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args.get("transactional-id"));
        // Short, so a killed member's open transaction is aborted by the coordinator soon.
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "6000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        long txns = 0;
        long records = 0;
        long lastDoneCheck = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
             KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            List<TopicPartition> all = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(input)) {
                all.add(new TopicPartition(input, info.partition()));
            }
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                if (!batch.isEmpty()) {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    producer.beginTransaction();
                    try {
                        for (ConsumerRecord<String, String> r : batch) {
                            producer.send(new ProducerRecord<>(output, r.key(), r.value()));
                            offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        }
                        if (paceMs > 0) {
                            Thread.sleep(paceMs);
                        }
                        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                        producer.commitTransaction();
                        txns++;
                        records += batch.count();
                        System.out.println("{\"txn\":" + txns + ",\"records\":" + batch.count() + ",\"epoch\":"
                            + consumer.groupMetadata().generationId() + "}");
                        System.out.flush();
                    } catch (ProducerFencedException | InvalidProducerEpochException e) {
                        System.out.println("{\"fenced\":\"" + e.getClass().getSimpleName() + "\"}");
                        exitFenced();
                    } catch (KafkaException e) {
                        // A stale member epoch or a rebalance: nothing of this transaction stays;
                        // read again from what the group committed.
                        producer.abortTransaction();
                        System.out.println("{\"aborted\":" + batch.count() + ",\"reason\":\""
                            + e.getClass().getSimpleName() + "\"}");
                        System.out.flush();
                        rewind(consumer);
                    }
                }
                if (untilDone && System.currentTimeMillis() - lastDoneCheck > 1000) {
                    lastDoneCheck = System.currentTimeMillis();
                    if (done(consumer, all)) {
                        System.out.println("{\"end\":true,\"txns\":" + txns + ",\"records\":" + records + "}");
                        System.out.flush();
                        System.exit(0);
                    }
                }
            }
        }
        System.err.println("timed out with " + records + " records in " + txns + " transactions");
        System.exit(2);
    }

    static void exitFenced() {
        System.out.flush();
        System.exit(3);
    }

    /** Seek every assigned partition to the group's committed offset (the beginning if none). */
    static void rewind(KafkaConsumer<String, String> consumer) {
        Set<TopicPartition> assigned = new HashSet<>(consumer.assignment());
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata o = committed.get(tp);
            if (o == null) {
                consumer.seekToBeginning(List.of(tp));
            } else {
                consumer.seek(tp, o.offset());
            }
        }
    }

    /** The group committed every input partition to its end offset. */
    static boolean done(KafkaConsumer<String, String> consumer, List<TopicPartition> all) {
        Map<TopicPartition, Long> ends = consumer.endOffsets(all);
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(new HashSet<>(all));
        for (TopicPartition tp : all) {
            OffsetAndMetadata o = committed.get(tp);
            if (o == null || o.offset() < ends.get(tp)) {
                return false;
            }
        }
        return true;
    }
}
