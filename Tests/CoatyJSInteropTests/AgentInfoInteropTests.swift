import CoatyKit
import Foundation
import Testing

extension CoatyJSInterop {
    /// `AgentInfo` as Coaty JS 2.4.1 carries it: in `logHost.agentInfo` of Log objects, which Coaty
    /// JS validates on receipt (`CoreTypes._isLog` → `_isLogHost` → `_isAgentInfo`).
    @Suite("AgentInfo with Coaty JS")
    struct AgentInfoInteropTests {
        @Test(
            "CoatyKit → Coaty JS: a Log with the configuration's agentInfo is accepted; one with a malformed agentInfo is dropped"
        )
        func logHostAgentInfoAcceptedByCoatyJS() async throws {
            try await withBroker { broker in
                try await withAgent(on: broker) { agent in
                    var info = AgentInfo.current(
                        packageName: "interop-agent",
                        packageVersion: "3.1.4",
                        environment: [:]
                    )
                    info.buildInfo.custom = ["commit": "abc123"]
                    let configuration = AgentConfiguration(agentInfo: info)
                    try await withCoatyJS("observe", ["--advertise-core-type", "Log", "--count", "1"], on: broker) {
                        peer in
                        try await peer.ready()
                        // Coaty JS drops a Log whose agentInfo lacks configInfo (inbound data not valid) …
                        let malformed = LogHost(agentInfo: ["packageInfo": ["name": "x", "version": "1"]])
                        try await agent.publishLog(.info, "malformed", host: malformed)
                        // … and takes the one in Coaty's shape.
                        let log = try await agent.publishLog(.warning, "well-formed", host: configuration.logHost)
                        // The peer's subscription may be acknowledged after its ready line on a loaded machine (the
                        // full suite on 2 cores missed both Logs twice): both are sent again, in the same order,
                        // until the peer took one.
                        let again = Task {
                            while !Task.isCancelled {
                                try? await Task.sleep(for: .seconds(2))
                                _ = try? await agent.publishLog(.info, "malformed", host: malformed)
                                try? await agent.publishAdvertise(log)
                            }
                        }
                        defer { again.cancel() }

                        let lines = try await peer.wait(for: "Advertise", count: 1)
                        let object = try #require(lines.first?.at("data.object"))
                        #expect(object["objectId"] == .string(log.objectId.uuidString))
                        #expect(object["logMessage"] == "well-formed")
                        #expect(object["logHost"]?["agentInfo"] == info.json)
                        #expect(object["logHost"]?["agentInfo"]?["buildInfo"]?["commit"] == "abc123")
                        #expect(object["logHost"]?["pid"] == .int(Int64(ProcessInfo.processInfo.processIdentifier)))
                    }
                }
            }
        }
    }
}
