/*
 * The Java client's own configuration definitions (ProducerConfig, ConsumerConfig, AdminClientConfig
 * of the kafka-clients jar on the classpath), printed as JSON for oncelog/spark/kafka_client_configs.json:
 * {"name": {"type": "INT", "validator": "[0,...]", "in": ["producer", "consumer"]}, ...}.
 * tests/kafka/kafka_config_table.py runs it against kafka-clients 4.4 and compares with the
 * committed table; the connector validates its kafka.* options against that table.
 */

import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;

public class ClientConfigDefs {
    public static void main(String[] argv) {
        Map<String, String[]> types = new TreeMap<>();
        Map<String, StringBuilder> roles = new TreeMap<>();
        String[] names = {"producer", "consumer", "admin"};
        ConfigDef[] defs = {ProducerConfig.configDef(), ConsumerConfig.configDef(), AdminClientConfig.configDef()};
        for (int i = 0; i < defs.length; i++) {
            for (ConfigDef.ConfigKey key : defs[i].configKeys().values()) {
                String validator = key.validator == null ? null : key.validator.toString();
                types.putIfAbsent(key.name, new String[] {key.type.name(), validator});
                roles.computeIfAbsent(key.name, k -> new StringBuilder());
                StringBuilder r = roles.get(key.name);
                r.append(r.length() == 0 ? "" : ",").append('"').append(names[i]).append('"');
            }
        }
        StringBuilder out = new StringBuilder("{\n");
        boolean first = true;
        for (Map.Entry<String, String[]> e : types.entrySet()) {
            out.append(first ? "" : ",\n");
            first = false;
            String validator = e.getValue()[1];
            out.append(" ").append(quote(e.getKey())).append(": {\"type\": ").append(quote(e.getValue()[0]))
               .append(", \"validator\": ").append(validator == null ? "null" : quote(validator))
               .append(", \"in\": [").append(roles.get(e.getKey())).append("]}");
        }
        out.append("\n}");
        System.out.println(out);
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20) {
                b.append(String.format("\\u%04x", (int) ch));
            } else {
                b.append(ch);
            }
        }
        return b.append('"').toString();
    }
}
