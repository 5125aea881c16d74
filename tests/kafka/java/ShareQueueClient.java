/*
 * A share group member with the Java client 4.x (KIP-932): a KafkaShareConsumer in explicit
 * acknowledgement mode that accepts every record, except that a value ending in "-release" is
 * released on its first delivery (so it comes back, with delivery count 2) and a value ending in
 * "-reject" is rejected (never to come back).
 *
 * Usage: ShareQueueClient --bootstrap B --topic T --group G --expect N [--timeout-ms MS]
 *
 * Prints one JSON line per delivery ({"value":..,"partition":..,"offset":..,"delivery_count":..,
 * "ack":"ACCEPT"|"RELEASE"|"REJECT"}) and {"end":true,"accepted":..} once N records were
 * accepted (or the timeout passed), after commitSync() made the last acknowledgements durable.
 */

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareQueueClient {

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new java.util.HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        int expect = Integer.parseInt(a.get("expect"));
        long deadline = System.currentTimeMillis() + Long.parseLong(a.getOrDefault("timeout-ms", "60000"));
        Properties p = new Properties();
        p.put("bootstrap.servers", a.get("bootstrap"));
        p.put("group.id", a.get("group"));
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        int accepted = 0;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(a.get("topic")));
            while (accepted < expect && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                    AcknowledgeType ack = AcknowledgeType.ACCEPT;
                    if (r.value().endsWith("-reject")) {
                        ack = AcknowledgeType.REJECT;
                    } else if (r.value().endsWith("-release") && count == 1) {
                        ack = AcknowledgeType.RELEASE;
                    }
                    c.acknowledge(r, ack);
                    if (ack == AcknowledgeType.ACCEPT) {
                        accepted++;
                    }
                    System.out.println("{\"value\":\"" + r.value() + "\",\"partition\":" + r.partition()
                            + ",\"offset\":" + r.offset() + ",\"delivery_count\":" + count + ",\"ack\":\"" + ack + "\"}");
                }
                c.commitSync();
            }
        }
        System.out.println("{\"end\":true,\"accepted\":" + accepted + "}");
    }
}
