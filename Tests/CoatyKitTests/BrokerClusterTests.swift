import CoatyKit
import CoatySync
import AgentProcessTestSupport
import Foundation
import Logging
import Testing

/// The warnings a manager logged.
private final class Warnings: Sendable {
    let list = CoatyMutex<[String]>([])
}

/// Keeps the warnings a manager logs.
private struct WarningLog: LogHandler {
    let warnings: Warnings
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .warning

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        warnings.list.withLock { $0.append("\(event.message)") }
    }
}

/// Waits for the next element, failing the test after `seconds`.
private func next<Element: Sendable>(
    _ events: EventObservation<Element>,
    within seconds: Int = 20,
    _ what: String
) async throws -> Element {
    let element = try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask {
            var iterator = events.makeAsyncIterator()
            return await iterator.next()
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
    return try #require(element, "no \(what) within \(seconds) s")
}

@Suite(
    "Agents on a RabbitMQ cluster",
    .serialized,
    .timeLimit(.minutes(5)),
    .enabled(if: RabbitMQCluster.shouldRun, Comment(rawValue: RabbitMQCluster.skipReason))
)
struct BrokerClusterTests {
    @Test(
        "Agents on nodes 1 and 3 of a 3-node RabbitMQ cluster exchange every event type with --broker-type rabbitmq (object types, dotted channel ids, operations and IO context names included); a standard agent is warned; when node 1 dies its agent fails over to node 2"
    )
    func clusterExchangeAndFailover() async throws {
        let cluster = try await RabbitMQCluster.start(nodes: 3)
        defer { Task { await cluster.stop() } }
        let (node1, node2, node3) = (cluster.nodes[0], cluster.nodes[1], cluster.nodes[2])
        let registry = CoatyObjectRegistry([Lamp.self])

        // A on node 1 (node 2 as its failover broker), B on node 3.
        var configurationA = AgentConfiguration(
            name: "A",
            brokerURL: node1.url,
            fallbackBrokerURLs: [node2.url],
            keepAlive: 5
        )
        configurationA.brokerType = .rabbitMQ
        let agentA = try CommunicationManager.mqtt(configuration: configurationA, registry: registry)
        var optionsB = CommunicationManager.Options()
        optionsB.brokerType = .rabbitMQ
        let agentB = try CommunicationManager.mqtt(
            url: node3.url,
            identity: Identity(name: "B"),
            registry: registry,
            options: optionsB
        )
        // C on node 3 as a user would first try it: the standard broker type.
        let warnings = Warnings()
        let agentC = try CommunicationManager.mqtt(
            url: node3.url,
            identity: Identity(name: "C"),
            registry: registry,
            logger: Logger(label: "c") { _ in WarningLog(warnings: warnings) }
        )
        try await agentA.start()
        try await agentB.start()
        try await agentC.start()
        defer {
            Task {
                await agentA.stop()
                await agentB.stop()
                await agentC.stop()
            }
        }

        // B observes and answers everything.
        let ioSourceId = CoatyUUID()
        let advertised = try agentB.observeAdvertise(Lamp.self)
        let advertisedCore = try agentB.observeAdvertise(coreType: .coatyObject)
        let missed = try agentC.observeAdvertise(Lamp.self)
        let channel = try agentB.observeChannel("com.example.lamps")
        let discovers = try agentB.observeDiscover()
        let queries = try agentB.observeQuery()
        let updates = try agentB.observeUpdate(Lamp.self)
        let calls = try agentB.observeCall(operation: "com.example.lamps.switch")
        let associates = try agentB.observeAssociate(ioContextName: "com.example.Lighting")
        let ioValues = try agentB.observeIoValue(ioSourceId: ioSourceId)
        let deadvertises = try agentB.observeDeadvertise()
        await advertised.subscribed()
        await advertisedCore.subscribed()
        await missed.subscribed()
        await channel.subscribed()
        await discovers.subscribed()
        await queries.subscribed()
        await updates.subscribed()
        await calls.subscribed()
        await associates.subscribed()
        await ioValues.subscribed()
        await deadvertises.subscribed()

        let lamp = Lamp(name: "Hall", isOn: true)
        let responders = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await discover in discovers where discover.data.externalId == "hall" {
                        try? await discover.resolve(object: AnyCoatyObject(json: ["externalId": "hall"], merging: lamp))
                    }
                }
                group.addTask {
                    for await query in queries where query.data.objectTypes == [Lamp.objectType] {
                        try? await query.retrieve(objects: [lamp])
                    }
                }
                group.addTask {
                    for await update in updates {
                        var completed = update.object
                        completed.name = "completed"
                        try? await update.complete(object: completed)
                    }
                }
                group.addTask {
                    for await call in calls {
                        try? await call.returnResult(["on": call.data.parameter("on") ?? .null])
                    }
                }
            }
        }
        defer { responders.cancel() }

        // One-way events from A (node 1) to B (node 3).
        try await agentA.publishAdvertise(lamp)
        let typed = try await next(advertised, "Advertise of com.example.Lamp")
        #expect(typed.object == lamp)
        #expect(typed.sourceId == agentA.identity.objectId)
        #expect(typed.topic.objectType == "com.example.Lamp", "the topic is read back with its dots")
        #expect(try await next(advertisedCore, "Advertise of CoatyObject").object.objectId == lamp.objectId)

        try await agentA.publishChannel("com.example.lamps", object: lamp)
        let channelEvent = try await next(channel, "Channel com.example.lamps")
        #expect(channelEvent.channelId == "com.example.lamps")
        #expect(channelEvent.data.objects.first?.objectId == lamp.objectId)

        let actorId = CoatyUUID()
        try await agentA.publishAssociate(
            ioContextName: "com.example.Lighting",
            data: AssociateEventData(ioSourceId: ioSourceId, ioActorId: actorId, associatingRoute: "com/example/route")
        )
        let associate = try await next(associates, "Associate in com.example.Lighting")
        #expect(associate.ioContextName == "com.example.Lighting")
        #expect(associate.data.ioActorId == actorId)

        try await agentA.publishIoValue(["lux": 420.5], ioSourceId: ioSourceId)
        #expect(try await next(ioValues, "IoValue").value() == ["lux": 420.5])

        // Two-way events: each request from A gets its response from B.
        let resolve = try #require(try await agentA.publishDiscover(.externalId("hall")).first(timeout: .seconds(20)))
        #expect(resolve.sourceId == agentB.identity.objectId)
        #expect(resolve.data.object?.objectId == lamp.objectId)

        let retrieve = try #require(
            try await agentA.publishQuery(QueryEventData(objectTypes: [Lamp.objectType])).first(timeout: .seconds(20))
        )
        #expect(retrieve.data.objects.map(\.objectId) == [lamp.objectId])

        let complete = try #require(try await agentA.publishUpdate(lamp).first(timeout: .seconds(20)))
        #expect(complete.data.object.name == "completed")

        let returned = try #require(
            try await agentA.publishCall("com.example.lamps.switch", data: CallEventData(parameters: ["on": true]))
                .first(timeout: .seconds(20))
        )
        #expect(returned.data.result == ["on": true])

        try await agentA.publishDeadvertise([lamp.objectId])
        #expect(try await next(deadvertises, "Deadvertise").objectIds == [lamp.objectId])

        // C, on the standard broker type, received the object-type Advertise as an invalid topic:
        // dropped, counted and named in a warning, never silently.
        #expect(agentC.statistics.invalidTopics >= 1)
        #expect(warnings.list.withLock { $0 }.contains { $0.contains("--broker-type rabbitmq") })

        // Node 1 dies: A fails over to node 2 and goes on receiving from B on node 3.
        let backOnline = Task { await awaitReconnection(agentA) }
        await cluster.kill(node1)
        await backOnline.value
        let fromB = try agentA.observeChannel("com.example.after.failover")
        await fromB.subscribed()
        try await agentB.publishChannel("com.example.after.failover", object: lamp)
        #expect(try await next(fromB, "Channel after failover").sourceId == agentB.identity.objectId)
        let afterFailover = try #require(
            try await agentA.publishDiscover(.externalId("hall")).first(timeout: .seconds(20))
        )
        #expect(afterFailover.data.object?.objectId == lamp.objectId)
    }
}

/// Returns once the manager went offline and came back online.
private func awaitReconnection(_ manager: CommunicationManager) async {
    var wentOffline = false
    for await state in manager.communicationStates() {
        if state == .offline { wentOffline = true }
        if wentOffline, state == .online { return }
    }
}
