/*
 * A small generator source connector for Kafka Connect's exactly-once source support (KIP-618),
 * as tests/kafka/test_kafka_connect.py runs it in a distributed worker with
 * exactly.once.source.support=enabled against oncelog and Apache Kafka (compiled against
 * connect-api 4.4.0).
 *
 * Connector config (besides Connect's own):
 *   topic      the output topic
 *   records    records per task (each task writes its own sequence)
 *   batch      records per poll()
 *   pace.ms    sleep before each poll() that returns records
 *
 * Task t writes key "t<t>-<i>", value "t<t>-v<i>" for i = 0 .. records-1, in order, and gives
 * each record the source partition {"task": t} and the source offset {"next": i + 1}. On start
 * it resumes at the "next" of the last offset Connect committed for its partition (0 when none).
 * With exactly-once support the offsets are written in the same transaction as the records, so
 * a worker killed mid-transaction loses both, and the next task writes exactly the records the
 * committed output lacks: every value once. Without it (the control) offsets are flushed
 * periodically, apart from the records, and a kill repeats what was written since the last flush.
 * The connector declares exactly-once support and nothing else (transaction boundaries are the
 * worker's: poll or interval).
 */

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

public class ConnectGenerator extends SourceConnector {
    static final ConfigDef CONFIG = new ConfigDef()
            .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "output topic")
            .define("records", ConfigDef.Type.LONG, 1000L, ConfigDef.Importance.HIGH, "records per task")
            .define("batch", ConfigDef.Type.INT, 10, ConfigDef.Importance.LOW, "records per poll")
            .define("pace.ms", ConfigDef.Type.LONG, 10L, ConfigDef.Importance.LOW, "sleep before a poll");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = new HashMap<>(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return GeneratorTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int t = 0; t < maxTasks; t++) {
            Map<String, String> config = new HashMap<>(props);
            config.put("task.index", Integer.toString(t));
            configs.add(config);
        }
        return configs;
    }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
        return ExactlyOnceSupport.SUPPORTED;
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return "1.0";
    }

    public static class GeneratorTask extends SourceTask {
        private String topic;
        private int index;
        private long records;
        private int batch;
        private long paceMs;
        private long next;
        private Map<String, Object> partition;

        @Override
        public void start(Map<String, String> props) {
            topic = props.get("topic");
            index = Integer.parseInt(props.get("task.index"));
            records = Long.parseLong(props.getOrDefault("records", "1000"));
            batch = Integer.parseInt(props.getOrDefault("batch", "10"));
            paceMs = Long.parseLong(props.getOrDefault("pace.ms", "10"));
            partition = Collections.singletonMap("task", index);
            Map<String, Object> offset = context.offsetStorageReader().offset(partition);
            next = offset == null ? 0 : ((Number) offset.get("next")).longValue();
            // the test reads this line from the worker's log: where each task resumed
            System.err.println("ConnectGenerator task " + index + " starts at " + next + " of " + records);
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            if (next >= records) {
                Thread.sleep(100);
                return null;
            }
            if (paceMs > 0) {
                Thread.sleep(paceMs);
            }
            List<SourceRecord> out = new ArrayList<>(batch);
            for (int n = 0; n < batch && next < records; n++, next++) {
                out.add(new SourceRecord(partition, Collections.singletonMap("next", next + 1), topic, null,
                        Schema.STRING_SCHEMA, "t" + index + "-" + next,
                        Schema.STRING_SCHEMA, "t" + index + "-v" + next));
            }
            return out;
        }

        @Override
        public void stop() {
        }

        @Override
        public String version() {
            return "1.0";
        }
    }
}
