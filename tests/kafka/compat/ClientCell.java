/*
 * One Java client version's row of the compatibility matrix (tests/kafka/test_client_versions.py):
 * the basics every application does, run against one broker, with only the client API that exists
 * from kafka-clients 2.8 to 4.4 (compiled against each version's own jar).
 *
 *   ClientCell --bootstrap H:P --prefix P [--consumer-protocol true]
 *
 * Checks, one JSON line each on stdout: {"check": NAME, "ok": true|false, "detail": ...}; a
 * failed check's detail is the exception's class and message, and later checks still run.
 *   admin          describeCluster (a node and a cluster id), createTopics (3 topics, 2 partitions),
 *                  listTopics sees them
 *   idempotent     enable.idempotence=true, acks=all: 10 records acknowledged, offsets 0..n-1 per
 *                  partition with no gap, all 10 read back
 *   transactional  initTransactions, then commit 5 / abort 3 / commit 4 records; a read_committed
 *                  consumer (assigned, from the beginning, to the end offsets) reads the 9 committed
 *                  values and none of the aborted
 *   group-classic  a consumer in a group (group.protocol classic, the only one before 3.7) reads the
 *                  9 committed records, commitSync; Admin.listConsumerGroupOffsets equals the end offsets
 *   group-consumer the same with group.protocol=consumer (KIP-848), when --consumer-protocol is given
 */

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ClientCell {
    static final int PARTITIONS = 2;
    static final Duration DEADLINE = Duration.ofSeconds(60);

    static String bootstrap;
    static String prefix;

    interface Check {
        String run() throws Exception;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        bootstrap = args.get("bootstrap");
        prefix = args.get("prefix");
        boolean consumerProtocol = "true".equals(args.get("consumer-protocol"));
        check("admin", ClientCell::admin);
        check("idempotent", ClientCell::idempotent);
        check("transactional", ClientCell::transactional);
        check("group-classic", () -> group("classic"));
        if (consumerProtocol) {
            check("group-consumer", () -> group("consumer"));
        }
        System.out.flush();
        System.exit(0);
    }

    static void check(String name, Check c) {
        String ok;
        String detail;
        try {
            detail = c.run();
            ok = "true";
        } catch (Throwable t) {
            Throwable root = t;
            while (root.getCause() != null && root != root.getCause()) {
                root = root.getCause();
            }
            detail = root.getClass().getSimpleName() + ": " + root.getMessage();
            ok = "false";
            t.printStackTrace();
        }
        System.out.println("{\"check\":\"" + name + "\",\"ok\":" + ok + ",\"detail\":\"" + escape(detail) + "\"}");
        System.out.flush();
    }

    static String escape(String s) {
        StringBuilder b = new StringBuilder();
        for (char ch : String.valueOf(s).toCharArray()) {
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20) {
                b.append(' ');
            } else {
                b.append(ch);
            }
        }
        return b.toString();
    }

    static String topic(String base) {
        return prefix + base;
    }

    static void require(boolean condition, String what) {
        if (!condition) {
            throw new IllegalStateException(what);
        }
    }

    // ------------------------------------------------------------------------- admin

    static Admin newAdmin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static String admin() throws Exception {
        try (Admin admin = newAdmin()) {
            Collection<Node> nodes = admin.describeCluster().nodes().get();
            String clusterId = admin.describeCluster().clusterId().get();
            require(!nodes.isEmpty(), "describeCluster: no node");
            require(clusterId != null && !clusterId.isEmpty(), "describeCluster: no cluster id");
            List<NewTopic> topics = new ArrayList<>();
            for (String base : Arrays.asList("idem", "txn", "group")) {
                topics.add(new NewTopic(topic(base), PARTITIONS, (short) 1));
            }
            admin.createTopics(topics).all().get();
            Set<String> names = admin.listTopics().names().get();
            for (NewTopic t : topics) {
                require(names.contains(t.name()), "listTopics does not list " + t.name());
            }
            return "nodes=" + nodes.size() + " topics=3";
        }
    }

    // ------------------------------------------------------------------------- producers

    static Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        return p;
    }

    static String idempotent() throws Exception {
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int i = 0; i < 10; i++) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic("idem"), i % PARTITIONS, "k" + i, "i" + i)).get();
                offsets.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
            }
        }
        for (Map.Entry<Integer, List<Long>> e : offsets.entrySet()) {
            List<Long> got = e.getValue();
            for (int i = 0; i < got.size(); i++) {
                require(got.get(i) == i, "partition " + e.getKey() + " offsets " + got);
            }
        }
        List<String> values = readAll(topic("idem"), "read_uncommitted", 10);
        require(values.size() == 10 && new HashSet<>(values).size() == 10, "read back " + values);
        return "offsets " + offsets + ", read back 10";
    }

    static String transactional() throws Exception {
        Properties p = producerProps();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic("txn-id"));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        Set<String> committed = new HashSet<>();
        Set<String> aborted = new HashSet<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            int[] sizes = {5, 3, 4};
            for (int t = 0; t < sizes.length; t++) {
                producer.beginTransaction();
                for (int i = 0; i < sizes[t]; i++) {
                    String v = "t" + t + "-" + i;
                    producer.send(new ProducerRecord<>(topic("txn"), i % PARTITIONS, "k" + i, v));
                    (t == 1 ? aborted : committed).add(v);
                }
                if (t == 1) {
                    producer.flush();
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        List<String> values = readAll(topic("txn"), "read_committed", committed.size());
        require(new HashSet<>(values).equals(committed) && values.size() == committed.size(),
                "read_committed read " + values + ", committed " + committed);
        return "read_committed read the 9 committed records, none of the 3 aborted";
    }

    // ------------------------------------------------------------------------- consumers

    static Properties consumerProps(String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return p;
    }

    static List<TopicPartition> partitions(String topic) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            out.add(new TopicPartition(topic, i));
        }
        return out;
    }

    /** Assigned, from the beginning, until ``expected`` values arrived and every position reached its end offset. */
    static List<String> readAll(String topic, String isolation, int expected) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(isolation))) {
            List<TopicPartition> tps = partitions(topic);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
                boolean atEnd = true;
                for (TopicPartition tp : tps) {
                    atEnd &= consumer.position(tp) >= ends.get(tp);
                }
                if (atEnd && values.size() >= expected) {
                    break;
                }
            }
        }
        return values;
    }

    static String group(String protocol) throws Exception {
        String group = topic("group-" + protocol);
        String source = topic("txn");
        Properties p = consumerProps("read_committed");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (!"classic".equals(protocol)) {
            p.put("group.protocol", protocol);  // the config exists from 3.7; classic is the default before and after
        }
        List<String> values = new ArrayList<>();
        Map<TopicPartition, Long> ends;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Collections.singletonList(source));
            ends = consumer.endOffsets(partitions(source));
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
                Set<TopicPartition> assigned = consumer.assignment();
                boolean atEnd = assigned.size() == PARTITIONS;
                for (TopicPartition tp : assigned) {
                    atEnd &= consumer.position(tp) >= ends.get(tp);
                }
                if (atEnd && values.size() >= 9) {
                    break;
                }
            }
            consumer.commitSync();
        }
        require(values.size() == 9, "the group read " + values.size() + " records: " + values);
        try (Admin admin = newAdmin()) {
            Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get();
            for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
                OffsetAndMetadata om = got.get(e.getKey());
                require(om != null && om.offset() == e.getValue(),
                        "committed " + got + " for end offsets " + ends);
            }
        }
        return "read 9, committed offsets = end offsets";
    }
}
