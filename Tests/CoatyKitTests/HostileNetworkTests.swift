import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Agents at QoS 1 on a real mosquitto, through a ``FaultInjectingProxy`` or with the broker itself
/// frozen or restarted: each fault is noticed, the agent reconnects by itself, and what the peer
/// published arrives (at least once; duplicates are counted and reported).
///
/// The subscribers keep a persistent session (`cleanSession` off), so the broker queues what is
/// published while they are away: at QoS 1 with a clean session that would be lost by design.
@Suite(
    "Hostile network between agents and a real mosquitto",
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(if: MosquittoBroker.findExecutable() != nil || ProcessInfo.processInfo.environment["CI"] == "true")
)
struct HostileNetworkTests {
    @Test(
        "A connection cut inside a packet is noticed; the agent reconnects, re-subscribes and loses nothing at QoS 1",
        arguments: [
            // 7 bytes into the broker's next write: inside a PUBLISH (longer than 7 bytes).
            (FaultInjectingProxy.Direction.toClient, 7),
            // 3 bytes into the agent's next write: inside a 4-byte PUBACK.
            (FaultInjectingProxy.Direction.toServer, 3),
        ]
    )
    func cutInsideAPacket(direction: FaultInjectingProxy.Direction, bytes: Int) async throws {
        let scenario = try await HostileScenario.start(
            subscriber: .throughProxy,
            publisher: .direct
        )
        defer { Task { await scenario.stop() } }
        let (received, log) = (scenario.received, scenario.subscriberLog)

        let count = 300
        let stream = try await scenario.startStream(count: count, pause: .milliseconds(10), flowing: 50)
        let faultAt = ContinuousClock.now
        #expect(await scenario.proxy.cut(afterForwarding: bytes, direction: direction) == 1)
        #expect(try await scenario.subscriberReconnected(after: faultAt))
        await stream.finished()
        // Events published after the reconnection arrive too.
        let after = LampStream.start(scenario.publisher, count: 20, first: count, pause: .zero)
        await after.finished()

        #expect(try await received.waitForAll(Set(0..<count + 20)))
        let statistics = await scenario.proxy.statistics()
        let lost = scenario.lost(of: stream).union(scenario.lost(of: after))
        let reconnected = log.firstConnection(after: faultAt).map { "\($0 - faultAt)" } ?? "never"
        HostileNetwork.report(
            "cut \(direction) after \(bytes) bytes: published \(count) + 20 after the reconnection, received "
                + "\(received.count) (\(received.distinct.count) distinct, \(received.duplicates) duplicates), "
                + "lost \(lost.count), losses \(log.losses), reconnected after \(reconnected)"
        )
        #expect(statistics.cut == 1)
        #expect(log.losses >= 1)
        #expect(stream.errors.isEmpty && after.errors.isEmpty)
        #expect(stream.published.count + after.published.count == count + 20)
        #expect(lost.isEmpty, "lost at QoS 1: \(lost.sorted().prefix(20))")
        #expect(received.firstReceptionsInOrder)
    }

    @Test("Connections reset (RST) while new ones are refused: the agent retries until it is let in, and loses nothing")
    func resetAndRefused() async throws {
        let scenario = try await HostileScenario.start(
            subscriber: .throughProxy,
            publisher: .direct
        )
        defer { Task { await scenario.stop() } }
        let (received, log) = (scenario.received, scenario.subscriberLog)

        let count = 300
        let stream = try await scenario.startStream(count: count, pause: .milliseconds(10), flowing: 50)
        let faultAt = ContinuousClock.now
        // At least one attempt is refused even when a loaded machine retries only after the 3 s.
        await scenario.proxy.refuseConnections(for: .seconds(3), atLeast: 1)
        #expect(await scenario.proxy.resetAll() == 1)
        #expect(try await scenario.subscriberReconnected(after: faultAt))
        let reconnected = try #require(log.firstConnection(after: faultAt)) - faultAt
        await stream.finished()

        #expect(try await received.waitForAll(Set(0..<count)))
        let statistics = await scenario.proxy.statistics()
        let lost = scenario.lost(of: stream)
        HostileNetwork.report(
            "reset + 3 s refusal: reconnected after \(reconnected), refused \(statistics.refused) attempts; "
                + "published \(stream.published.count), received \(received.count) (\(received.duplicates) "
                + "duplicates), lost \(lost.count), losses \(log.losses)"
        )
        #expect(statistics.reset == 1)
        #expect(statistics.refused >= 1, "the agent retried during the refusal")
        #expect(reconnected >= .seconds(3), "let in only after the refusal")
        #expect(log.losses >= 1)
        #expect(stream.errors.isEmpty)
        #expect(lost.isEmpty, "lost at QoS 1: \(lost.sorted().prefix(20))")
    }

    @Test("The proxy's faults as a plain TCP client sees them: refused and reset connections get RST, a cut gets FIN")
    func howConnectionsEnd() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let proxy = try await FaultInjectingProxy(targetPort: broker.port)
        defer { Task { await proxy.stop() } }

        await proxy.refuseConnections(for: .seconds(30))
        let refused = try #require(LoopbackSocket(port: proxy.port))
        #expect(refused.howItEnds() == "reset")
        await proxy.passThrough()

        let reset = try #require(LoopbackSocket(port: proxy.port))
        #expect(try await HostileNetwork.wait(for: .seconds(5)) { await proxy.statistics().openConnections == 1 })
        #expect(await proxy.resetAll() == 1)
        #expect(reset.howItEnds() == "reset")

        // A CONNECT (MQTT 3.1.1, client id "c", keep-alive 60 s): the CONNACK is 4 bytes; the cut lets 2 through.
        let cut = try #require(LoopbackSocket(port: proxy.port))
        #expect(try await HostileNetwork.wait(for: .seconds(5)) { await proxy.statistics().openConnections == 1 })
        #expect(await proxy.cut(afterForwarding: 2, direction: .toClient) == 1)
        #expect(cut.send([0x10, 13, 0, 4] + Array("MQTT".utf8) + [4, 2, 0, 60, 0, 1, UInt8(ascii: "c")]))
        #expect(cut.howItEnds() == "data")
        #expect(cut.howItEnds() == "data")
        #expect(cut.howItEnds() == "closed")
        let statistics = await proxy.statistics()
        HostileNetwork.report("plain TCP: \(statistics)")
        #expect(statistics.refused == 1)
        #expect(statistics.reset == 1)
        #expect(statistics.cut == 1)
        #expect(statistics.bytesToClient == 2)
    }

    @Test("A half-open connection is detected by the missing PINGRESP; the agent reconnects and loses nothing")
    func halfOpenConnection() async throws {
        let keepAlive = Duration.seconds(5)
        let scenario = try await HostileScenario.start(
            subscriber: .throughProxy,
            publisher: .direct,
            keepAlive: keepAlive
        )
        defer { Task { await scenario.stop() } }
        let (received, log) = (scenario.received, scenario.subscriberLog)

        // Publishing goes on past the detection (about two keep-alives) and the reconnection.
        let count = 750
        let stream = try await scenario.startStream(count: count, pause: .milliseconds(20), flowing: 30)
        let faultAt = ContinuousClock.now
        #expect(await scenario.proxy.halfOpen() == 1)
        #expect(try await scenario.subscriberReconnected(after: faultAt))
        let detection = log.firstLoss(after: faultAt).map { $0 - faultAt }
        await stream.finished()

        #expect(try await received.waitForAll(Set(0..<count)))
        let lost = scenario.lost(of: stream)
        HostileNetwork.report(
            "half-open, keep-alive \(keepAlive): detected after \(detection.map { "\($0)" } ?? "never"); "
                + "published \(stream.published.count), received \(received.count) (\(received.duplicates) "
                + "duplicates), lost \(lost.count), losses \(log.losses)"
        )
        // libmosquitto sends PINGREQ once nothing arrived for a keep-alive and gives up when nothing
        // arrived for another one; its clock counts whole seconds. Measured: about 2 × keep-alive.
        let detected = try #require(detection)
        #expect(detected <= keepAlive * 4 + .seconds(2), "detection took \(detected)")
        #expect(detected >= keepAlive / 2, "detected before a keep-alive could have told")
        #expect(log.losses >= 1)
        #expect(stream.errors.isEmpty)
        #expect(lost.isEmpty, "lost at QoS 1: \(lost.sorted().prefix(20))")
    }

    @Test("A half-open connection while a full observer holds the reads is detected once the consumer goes on")
    func halfOpenWhileReadsAreHeld() async throws {
        let keepAlive = Duration.seconds(5)
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let proxy = try await FaultInjectingProxy(targetPort: broker.port)
        defer { Task { await proxy.stop() } }
        let subscriber = try HostileNetwork.agent(
            url: proxy.mqttURL,
            name: "subscriber",
            keepAlive: keepAlive,
            persistentSession: true,
            observerBufferLimit: 16
        )
        let publisher = try HostileNetwork.agent(url: broker.url, name: "publisher", keepAlive: keepAlive)
        try await subscriber.start()
        try await publisher.start()
        let lamps = try subscriber.observeAdvertise(Lamp.self)
        await lamps.subscribed()
        let log = ConnectionLog.follow(subscriber.transport)
        defer { log.stop() }

        // Nobody consumes: the observer fills and the agent holds its reads.
        let count = 200
        let stream = LampStream.start(publisher, count: count, pause: .zero)
        await stream.finished()
        #expect(try await HostileNetwork.wait(for: .seconds(30)) { subscriber.statistics.readHolds > 0 })
        let faultAt = ContinuousClock.now
        #expect(await proxy.halfOpen() == 1)
        let stall = keepAlive * 2 + .seconds(2)
        try await Task.sleep(for: stall)
        let lossesDuringStall = log.losses

        // The consumer goes on: reading resumes, libmosquitto's keep-alive check runs again.
        let resumedAt = ContinuousClock.now
        var numbers: [Int] = []
        for await event in lamps {
            if let number = Int(event.object.name) { numbers.append(number) }
            if Set(numbers).count == count { break }
        }
        try await HostileNetwork.wait(for: keepAlive * 4 + .seconds(2)) { log.firstLoss(after: faultAt) != nil }
        let detection = log.firstLoss(after: faultAt).map { $0 - resumedAt }
        HostileNetwork.report(
            "half-open while reads are held, keep-alive \(keepAlive): losses during a \(stall) stall "
                + "\(lossesDuringStall); detected \(detection.map { "\($0)" } ?? "never") after the consumer went on; "
                + "received \(numbers.count) (\(numbers.count - Set(numbers).count) duplicates) of \(count)"
        )
        // While the reads are held the network thread writes its own PINGREQs and skips libmosquitto's
        // keep-alive check (so a slow consumer does not end a healthy session): a silent connection is not
        // noticed during the stall (`lossesDuringStall` is 0), only once reading resumes.
        let detected = try #require(detection)
        #expect(detected <= keepAlive * 4 + .seconds(2), "detection took \(detected) after the consumer went on")
        #expect(Set(numbers) == Set(0..<count))
        await subscriber.stop()
        await publisher.stop()
    }

    @Test("2 s delay spikes below the keep-alive: the connections stay up, nothing is lost, duplicated or reordered")
    func delaySpikes() async throws {
        let keepAlive = Duration.seconds(5)
        let scenario = try await HostileScenario.start(
            subscriber: .throughProxy,
            publisher: .throughProxy,
            keepAlive: keepAlive
        )
        defer { Task { await scenario.stop() } }
        let received = scenario.received

        let count = 200
        let stream = LampStream.start(scenario.publisher, count: count, pause: .milliseconds(10))
        for threshold in [30, 100] {
            #expect(try await HostileNetwork.wait(for: .seconds(30)) { received.count >= threshold })
            await scenario.proxy.delaySpike(for: .seconds(2))
            try await Task.sleep(for: .milliseconds(2500))
        }
        await stream.finished()

        #expect(try await received.waitForAll(Set(0..<count)))
        let statistics = await scenario.proxy.statistics()
        let losses = (scenario.subscriberLog.losses, scenario.publisherLog.losses)
        HostileNetwork.report(
            "two 2 s spikes, keep-alive \(keepAlive): published \(stream.published.count), received "
                + "\(received.count) (\(received.duplicates) duplicates), losses \(losses), proxy \(statistics)"
        )
        #expect(statistics.delaySpikes == 2)
        #expect(received.all == Array(0..<count))
        #expect(losses == (0, 0))
        #expect(statistics.accepted == 2, "no reconnection through the proxy")
    }

    @Test("A broker frozen (SIGSTOP) for 3 keep-alives: both agents reconnect by themselves; nothing is lost at QoS 1")
    func frozenBroker() async throws {
        let keepAlive = Duration.seconds(5)
        let broker = try await MosquittoBroker.start()
        let scenario = try await HostileScenario.start(
            broker,
            subscriber: .direct,
            publisher: .direct,
            keepAlive: keepAlive
        )
        defer { Task { await scenario.stop() } }
        let (received, log) = (scenario.received, scenario.subscriberLog)

        let count = 300
        let stream = try await scenario.startStream(count: count, pause: .milliseconds(20), flowing: 30)
        let pid = try #require(broker.processIdentifier)
        let frozenAt = ContinuousClock.now
        #expect(kill(pid, SIGSTOP) == 0)
        try await Task.sleep(for: keepAlive * 3)
        #expect(kill(pid, SIGCONT) == 0)
        let thawedAt = ContinuousClock.now
        #expect(try await scenario.subscriberReconnected(after: thawedAt))
        await stream.finished()

        #expect(try await received.waitForAll(Set(0..<count)))
        let lost = scenario.lost(of: stream)
        let detection = log.firstLoss(after: frozenAt).map { "\($0 - frozenAt)" } ?? "never"
        let back = log.firstConnection(after: thawedAt).map { "\($0 - thawedAt)" } ?? "never"
        HostileNetwork.report(
            "SIGSTOP for \(keepAlive * 3): subscriber lost the connection after \(detection), back \(back) after "
                + "SIGCONT; published \(stream.published.count), received \(received.count) "
                + "(\(received.duplicates) duplicates), lost \(lost.count), losses \(log.losses) / "
                + "\(scenario.publisherLog.losses)"
        )
        #expect(log.losses >= 1)
        #expect(scenario.publisherLog.losses >= 1)
        #expect(stream.errors.isEmpty)
        #expect(stream.published.count == count)
        #expect(lost.isEmpty, "lost at QoS 1: \(lost.sorted().prefix(20))")
    }

    @Test("A broker restart during a QoS 1 stream: every publication that returned is received at least once")
    func brokerRestart() async throws {
        // A broker that saves its sessions and queued messages on shutdown (mosquitto's persistence), so the
        // subscriber's persistent session survives the restart as it would in production.
        let store = FileManager.default.temporaryDirectory
            .appendingPathComponent("coaty-hostile-\(UUID().uuidString.lowercased())").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: store) }
        let broker = try MosquittoBroker(additionalConfiguration: [
            "persistence true", "persistence_location \(store)/", "autosave_interval 0",
        ])
        try await broker.start()
        let scenario = try await HostileScenario.start(broker, subscriber: .direct, publisher: .direct)
        defer { Task { await scenario.stop() } }
        let (received, log) = (scenario.received, scenario.subscriberLog)

        let count = 300
        let stream = try await scenario.startStream(count: count, pause: .milliseconds(10), flowing: 60)
        let restartAt = ContinuousClock.now
        await broker.stop()
        try await broker.start()
        #expect(try await scenario.subscriberReconnected(after: restartAt))
        await stream.finished()

        let published = Set(stream.published)
        #expect(try await received.waitForAll(published))
        let lost = scenario.lost(of: stream)
        HostileNetwork.report(
            "broker restart: published (returned) \(published.count) of \(count), errors \(stream.errors.count), "
                + "received \(received.count) (\(received.distinct.count) distinct, \(received.duplicates) "
                + "duplicates), lost \(lost.count), losses \(log.losses) / \(scenario.publisherLog.losses), "
                + "deferred overflow \(scenario.publisher.statistics.deferredOverflow)"
        )
        #expect(log.losses >= 1)
        #expect(scenario.publisherLog.losses >= 1)
        #expect(scenario.publisher.statistics.deferredOverflow == 0)
        #expect(lost.isEmpty, "lost at QoS 1: \(lost.sorted().prefix(20))")
    }
}
