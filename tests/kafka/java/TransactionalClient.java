/*
 * The Java client (kafka-clients 4.x) as a user runs it, for tests/kafka/test_java_clients.py and
 * test_kafka_tools.py: a transactional producer and a read_committed consumer, driven by
 * arguments, writing what they did as JSON lines on stdout for the test to check.
 *
 *   produce --bootstrap H:P --topic T --partitions N --transactional-id ID --plan commit:5,abort:3,...
 *       initTransactions, then one transaction per plan step: step i sends its records (value
 *       "t<i>-<j>", key "<j>", partition j % N), flushes, and commits or aborts. One line per
 *       transaction: {"transaction":i,"outcome":"commit","records":[{"partition":p,"offset":o,"value":v},...]}
 *       (offsets from the send futures, known before the outcome). With transaction version 2
 *       finalized by the broker, the client sends Produce v12 (the partition joins the
 *       transaction implicitly) and EndTxn v5 (the coordinator bumps the epoch each time).
 *
 *   outlive --bootstrap H:P --topic T --transactional-id ID --transaction-timeout-ms MS --proceed-file F
 *       a transaction that outlives its timeout: one record sent, then idle until the file F
 *       exists (the test creates it once the coordinator aborted the transaction), then commitTransaction; then abortTransaction if the producer may;
 *       then one more committed transaction, with this producer if it can still make one, else
 *       with a new one (initTransactions). One line per step: {"step":"commit","outcome":"ok"} or
 *       the exception's class, and for the last {"step":"next","producer":"same"|"new",...}.
 *
 *   consume --bootstrap H:P --topic T --partitions N --expected K [--group G] [--timeout-ms MS]
 *       read_committed from the beginning (assigned, or subscribed in group G), until K records
 *       arrived and every partition's position reached its end offset (for read_committed the
 *       last stable offset); one line per record {"partition":p,"offset":o,"key":k,"value":v},
 *       then {"end":true,"records":K}. Exit 2 if that did not happen within the timeout.
 */

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TransactionalClient {

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            throw new IllegalArgumentException("usage: TransactionalClient produce|consume --name value ...");
        }
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        int rc;
        switch (argv[0]) {
            case "produce":
                rc = produce(args);
                break;
            case "consume":
                rc = consume(args);
                break;
            case "outlive":
                rc = outlive(args);
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + argv[0]);
        }
        System.out.flush();
        System.exit(rc);
    }

    static int produce(Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        int partitions = Integer.parseInt(args.getOrDefault("partitions", "1"));
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args.get("transactional-id"));
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            System.out.println("{\"initialized\":true}");
            String[] steps = args.get("plan").split(",");
            for (int i = 0; i < steps.length; i++) {
                String[] step = steps[i].split(":");
                String outcome = step[0];
                int count = Integer.parseInt(step[1]);
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                List<String> values = new ArrayList<>();
                for (int j = 0; j < count; j++) {
                    String value = "t" + i + "-" + j;
                    values.add(value);
                    sent.add(producer.send(new ProducerRecord<>(topic, j % partitions, Integer.toString(j), value)));
                }
                producer.flush();
                StringBuilder line = new StringBuilder();
                line.append("{\"transaction\":").append(i).append(",\"outcome\":\"").append(outcome).append("\",\"records\":[");
                for (int j = 0; j < count; j++) {
                    RecordMetadata md = sent.get(j).get();
                    if (j > 0) line.append(',');
                    line.append("{\"partition\":").append(md.partition()).append(",\"offset\":").append(md.offset())
                        .append(",\"value\":\"").append(values.get(j)).append("\"}");
                }
                line.append("]}");
                if (outcome.equals("commit")) {
                    producer.commitTransaction();
                } else if (outcome.equals("abort")) {
                    producer.abortTransaction();
                } else {
                    throw new IllegalArgumentException("plan step " + steps[i] + ": commit or abort");
                }
                System.out.println(line);
            }
        }
        return 0;
    }

    static Properties producerProps(Map<String, String> args) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args.get("transactional-id"));
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, args.getOrDefault("transaction-timeout-ms", "60000"));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return props;
    }

    static String outcome(Runnable step) {
        try {
            step.run();
            return "ok";
        } catch (RuntimeException e) {
            return e.getClass().getSimpleName();
        }
    }

    static int outlive(Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        java.nio.file.Path proceed = java.nio.file.Paths.get(args.get("proceed-file"));
        KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(args));
        try {
            producer.initTransactions();
            producer.beginTransaction();
            RecordMetadata first = producer.send(new ProducerRecord<>(topic, 0, "k", "outlived")).get();
            System.out.println("{\"step\":\"send\",\"offset\":" + first.offset() + "}");
            while (!java.nio.file.Files.exists(proceed)) {
                Thread.sleep(50);
            }
            System.out.println("{\"step\":\"commit\",\"outcome\":\"" + outcome(producer::commitTransaction) + "\"}");
            System.out.println("{\"step\":\"abort\",\"outcome\":\"" + outcome(producer::abortTransaction) + "\"}");
            final KafkaProducer<String, String> same = producer;
            String next = outcome(() -> {
                same.beginTransaction();
                try {
                    same.send(new ProducerRecord<>(topic, 0, "k", "after")).get();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                same.commitTransaction();
            });
            String who = "same";
            if (!next.equals("ok")) {
                producer.close();
                producer = new KafkaProducer<>(producerProps(args));
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, "k", "after")).get();
                producer.commitTransaction();
                who = "new";
            }
            System.out.println("{\"step\":\"next\",\"producer\":\"" + who + "\",\"same_outcome\":\"" + next + "\"}");
        } finally {
            producer.close();
        }
        return 0;
    }

    static int consume(Map<String, String> args) {
        String topic = args.get("topic");
        int partitions = Integer.parseInt(args.getOrDefault("partitions", "1"));
        long expected = Long.parseLong(args.getOrDefault("expected", "0"));
        long timeoutMs = Long.parseLong(args.getOrDefault("timeout-ms", "60000"));
        String group = args.get("group");
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        List<TopicPartition> all = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            all.add(new TopicPartition(topic, p));
        }
        long got = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            if (group != null) {
                consumer.subscribe(List.of(topic));
            } else {
                consumer.assign(all);
                consumer.seekToBeginning(all);
            }
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    got++;
                    System.out.println("{\"partition\":" + r.partition() + ",\"offset\":" + r.offset() + ",\"key\":\""
                        + r.key() + "\",\"value\":\"" + r.value() + "\"}");
                }
                if (got >= expected && consumer.assignment().size() == partitions && caughtUp(consumer)) {
                    if (group != null) {
                        consumer.commitSync();
                    }
                    System.out.println("{\"end\":true,\"records\":" + got + "}");
                    return 0;
                }
            }
        }
        System.err.println("timed out after " + timeoutMs + " ms with " + got + " of " + expected + " records");
        return 2;
    }

    /** Every assigned partition's position is at its end offset (read_committed: the LSO). */
    static boolean caughtUp(KafkaConsumer<String, String> consumer) {
        Map<TopicPartition, Long> ends = consumer.endOffsets(consumer.assignment());
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
