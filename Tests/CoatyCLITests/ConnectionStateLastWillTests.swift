import CoatyKit
import CoatyTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Connection state of agent processes", .serialized, .enabled(if: BrokerAvailability.shouldRun))
struct ConnectionStateLastWillTests {
    @Test("An agent process killed with SIGKILL leaves the connection state by its last will, once")
    func killedAgentLeaves() async throws {
        try await withBroker { broker in
            try await withAgent(on: broker, name: "watcher") { watcher in
                let controller = ConnectionStateController(communicationManager: watcher)
                var changes = controller.changes().makeAsyncIterator()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await controller.run() }
                    await controller.started()

                    let victim = try await startReadyCoaty(
                        ["observe", "channel", "idle", "--broker", broker.url],
                        name: "victim",
                        observer: watcher
                    )
                    let joined = try #require(await changes.next())
                    #expect(joined.joined.map(\.name) == ["victim"])
                    let victimId = try #require(joined.joined.first?.objectId)
                    #expect(controller.isOnline(victimId))

                    victim.signal(SIGKILL)
                    let left = try #require(await changes.next())
                    #expect(left.left.map(\.objectId) == [victimId], "the broker published the will")
                    #expect(left.joined.isEmpty)
                    #expect(left.online.isEmpty)
                    #expect(controller.onlineAgents.isEmpty)
                    #expect(await victim.finish(timeout: 10).status != 0)
                    group.cancelAll()
                }
                let end = await changes.next()
                #expect(end == nil, "each change is reported once")
            }
        }
    }
}
