import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Last will of an agent process", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct LastWillTests {
    @Test("An agent process killed with SIGKILL is deadvertised by its last will")
    func lastWillOnKill() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker, name: "watcher") { watcher in
                let identities = try watcher.observeAdvertise(coreType: .identity)
                let deadvertises = try watcher.observeDeadvertise()
                await identities.subscribed()
                await deadvertises.subscribed()

                let victim = try await startReadyCoaty(
                    ["observe", "channel", "idle", "--broker", broker.url],
                    name: "victim",
                    observer: watcher
                )
                let victimIdentity = try #require(
                    try await first(identities, timeout: 1) { $0.object.name == "victim" }
                )
                let victimId = victimIdentity.object.objectId

                victim.signal(SIGKILL)
                let will = try await first(deadvertises, timeout: 30) { $0.objectIds.contains(victimId) }
                #expect(will != nil, "the broker publishes the will of the killed agent")
                #expect(will?.sourceId == victimId)
                #expect(will?.topic.name == "coaty/3/-/DAD/\(victimId)")
                #expect(await victim.finish(timeout: 10).status != 0)
            }
        }
    }
}
