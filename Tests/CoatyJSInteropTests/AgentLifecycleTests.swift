import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension CoatyJSInterop {
    /// Joining and leaving between CoatyKit and the real Coaty JS 2.4.1: the identity Advertise of a
    /// joining agent, its Deadvertise on a clean stop, and the last will of a killed process.
    @Suite("Agent lifecycle with Coaty JS")
    struct AgentLifecycleTests {
        @Test("Coaty JS → CoatyKit: a joining Coaty JS agent's identity Advertise, and its Deadvertise on stop")
        func coatyJSJoinsAndLeaves() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker) { agent in
                    let identities = try agent.observeAdvertise(coreType: .identity)
                    let deadvertises = try agent.observeDeadvertise()
                    await identities.subscribed()
                    await deadvertises.subscribed()
                    let name = "coaty-js \(CoatyUUID())"
                    try await withCoatyJS("idle", ["--name", name], on: broker, timeout: 20) { peer in
                        let jsId = try await peer.identityId()
                        let joined = try #require(try await first(identities, timeout: 5) { $0.object.name == name })
                        #expect(joined.object.objectId == jsId)
                        #expect(joined.sourceId == jsId)
                        #expect(joined.object.coreType == .identity)
                        #expect(joined.object.objectType == "coaty.Identity")
                        #expect(joined.topic.name == "coaty/3/-/ADV:Identity/\(jsId)")
                        #expect(joined.object.as(Identity.self)?.name == name)

                        peer.signal(SIGTERM)
                        let left = try #require(try await first(deadvertises, timeout: 5) { $0.sourceId == jsId })
                        #expect(left.objectIds == [jsId])
                        #expect(await peer.finish() == 0, "Coaty JS stops cleanly on SIGTERM")
                        #expect(try peer.events("done").first?["reason"] == "signal")
                    }
                }
            }
        }

        @Test("CoatyKit → Coaty JS: a joining CoatyKit agent's identity Advertise, and its Deadvertise on stop")
        func coatyKitJoinsAndLeaves() async throws {
            try await withBroker { broker in
                let observe = ["--advertise-core-type", "Identity", "--deadvertise"]
                try await withCoatyJS("observe", observe, on: broker, timeout: 20) { peer in
                    try await peer.ready()
                    let identity = Identity(name: "CoatyKit joiner")
                    let joiner = try CommunicationManager.mqtt(url: broker.url, identity: identity)
                    try await joiner.start()
                    let kitId = JSONValue.string(identity.objectId.uuidString)
                    let joined = try await peer.first("Advertise") { $0.at("data.object.objectId") == kitId }
                    #expect(joined["via"] == "core-type Identity")
                    #expect(joined["sourceId"] == kitId)
                    #expect(joined.at("data.object.name") == "CoatyKit joiner")
                    #expect(joined.at("data.object.coreType") == "Identity")
                    #expect(joined.at("data.object.objectType") == "coaty.Identity")
                    #expect(joined.at("data.privateData") == nil)

                    await joiner.stop()
                    let left = try await peer.first("Deadvertise") { $0["sourceId"] == kitId }
                    #expect(left.at("data.objectIds") == [kitId])
                }
            }
        }

        @Test("Coaty JS → CoatyKit: the last will of a Coaty JS process killed with SIGKILL deadvertises its identity")
        func coatyJSLastWill() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker) { agent in
                    let deadvertises = try agent.observeDeadvertise()
                    await deadvertises.subscribed()
                    try await withCoatyJS("idle", on: broker, timeout: 20) { peer in
                        let jsId = try await peer.identityId()
                        peer.signal(SIGKILL)
                        let will = try #require(
                            try await first(deadvertises, timeout: 5) { $0.objectIds.contains(jsId) },
                            "the broker publishes Coaty JS's last will"
                        )
                        #expect(will.objectIds == [jsId])
                        #expect(will.sourceId == jsId)
                        #expect(will.topic.name == "coaty/3/-/DAD/\(jsId)")
                        #expect(await peer.finish() != 0)
                        #expect(try peer.events("done").isEmpty, "killed, not stopped: no clean Deadvertise")
                    }
                }
            }
        }

        @Test("CoatyKit → Coaty JS: the last will of a `coaty` process killed with SIGKILL deadvertises its identity")
        func coatyKitLastWill() async throws {
            try await withBroker { broker in
                try await withCoatyJS(
                    "observe",
                    ["--advertise-core-type", "Identity", "--deadvertise"],
                    on: broker,
                    timeout: 20
                ) {
                    peer in
                    try await peer.ready()
                    let name = "coaty cli \(CoatyUUID())"
                    let coaty = try TestProcess(
                        executable: try builtExecutable(named: "coaty"),
                        ["observe", "channel", "idle", "--broker", broker.url, "--name", name]
                    )
                    do {
                        let joined = try await peer.first("Advertise") { $0.at("data.object.name") == .string(name) }
                        let kitId = try #require(joined.at("data.object")?.objectIdValue)
                        coaty.signal(SIGKILL)
                        let will = try await peer.first("Deadvertise") { $0["sourceId"] == .string(kitId.uuidString) }
                        #expect(will.at("data.objectIds") == [.string(kitId.uuidString)])
                        #expect(await coaty.finish(timeout: 10).status != 0)
                    } catch {
                        coaty.signal(SIGKILL)
                        _ = await coaty.finish(timeout: 10)
                        throw error
                    }
                }
            }
        }
    }
}
