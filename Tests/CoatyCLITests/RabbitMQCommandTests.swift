import CoatyKit
import Foundation
import Testing

@Suite(
    "coaty on RabbitMQ's MQTT plugin",
    .serialized,
    .timeLimit(.minutes(3)),
    .enabled(if: RabbitMQCluster.shouldRun, Comment(rawValue: RabbitMQCluster.skipReason))
)
struct RabbitMQCommandTests {
    @Test(
        "observe --object-type with --broker-type rabbitmq prints the Advertise; without it the event is dropped with a warning naming the option"
    )
    func observeByObjectType() async throws {
        let rabbit = try await RabbitMQCluster.start(nodes: 1)
        defer { Task { await rabbit.stop() } }
        let broker = rabbit.nodes[0].url
        let watcher = try CommunicationManager.mqtt(url: broker, identity: Identity(name: "watcher"))
        try await watcher.start()
        defer { Task { await watcher.stop() } }

        let observe = ["observe", "advertise", "--object-type", "com.example.Light", "--broker", broker]
        let reading = try await startReadyCoaty(
            observe + ["--broker-type", "rabbitmq", "--count", "1", "--timeout", "30"],
            name: "observer-rabbitmq",
            observer: watcher
        )
        let standard = try await startReadyCoaty(
            observe + ["--timeout", "8"],
            name: "observer-standard",
            observer: watcher
        )
        let lamp = Samples.light("Lamp")
        let sent = try await runCoaty(["advertise", "--broker", broker, "\(lamp)"])
        #expect(sent.status == 0, "stderr: \(sent.stderr)")

        let read = await reading.finish()
        #expect(read.status == 0, "stderr: \(read.stderr)")
        let lines = try read.jsonLines()
        try #require(lines.count == 1, "stdout: \(read.stdout)")
        #expect(checkEventLine(lines[0], event: "Advertise")?["object"] == lamp)
        #expect(lines[0].objectValue?["topic"]?.stringValue?.contains("ADV::com.example.Light") == true)

        let missed = await standard.finish()
        #expect(missed.stdout.isEmpty, "stdout: \(missed.stdout)")
        #expect(missed.stderr.contains("--broker-type rabbitmq"), "stderr: \(missed.stderr)")
    }

    @Test("--broker-type takes standard or rabbitmq; --group is refused on rabbitmq")
    func usage() async throws {
        let unknown = try await runCoaty(["advertise", "--broker-type", "emqx", "{}"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("standard or rabbitmq"), "stderr: \(unknown.stderr)")
        let group = try await runCoaty(["record", "--db", ":memory:", "--group", "g", "--broker-type", "rabbitmq"])
        #expect(group.status == 2)
        #expect(group.stderr.contains("shared subscriptions"), "stderr: \(group.stderr)")
    }
}
