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
    /// `coaty respond` answering the real Coaty JS 2.4.1 requester.
    @Suite("coaty respond answers Coaty JS")
    struct CLIResponderTests {
        /// Runs `coaty respond …` (ready) while `body` runs Coaty JS requesters, then stops it.
        private func withCLIResponder(
            _ arguments: [String],
            on broker: MosquittoBroker,
            _ body: () async throws -> Void
        ) async throws {
            try await withAgent(on: broker) { watcher in
                let result = try await withReadyProcess(
                    executable: try builtExecutable(named: "coaty"),
                    ["respond"] + arguments + ["--timeout", "60", "--broker", broker.url, "--name", "cli responder"],
                    name: "cli responder",
                    observer: watcher,
                    body
                )
                #expect(result.status == 0, "stderr: \(result.stderr)")
            }
        }

        @Test("Coaty JS → coaty respond call --exec: the parameters go through the command and back")
        func callExec() async throws {
            try await withBroker { broker in
                try await withCLIResponder(["call", "interop.echo", "--exec", "cat"], on: broker) {
                    let peer = try await runCoatyJS(
                        "call",
                        ["--operation", "interop.echo", "--params", #"{"a":2,"b":[40,"x"]}"#, "--count", "1"],
                        on: broker
                    )
                    let returned = try #require(try peer.events("Return").first, "\(peer.diagnostics)")
                    #expect(returned.at("data.result") == ["a": 2, "b": [40, "x"]])
                    #expect(returned.at("data.error") == nil)
                }
            }
        }

        @Test("Coaty JS → coaty respond query: conditions, orderBy, skip and take")
        func query() async throws {
            try await withBroker { broker in
                let lamps = sampleLamps
                try await withCLIResponder(["query", "--objects", try jsonArgument(lamps)], on: broker) {
                    let filter = #"""
                        {"conditions":["isOn",[7,true]],"orderByProperties":[["brightness","Desc"]],"skip":1,"take":2}
                        """#
                    let peer = try await runCoatyJS(
                        "query",
                        ["--object-types", Lamp.objectType, "--filter", filter, "--count", "1"],
                        on: broker
                    )
                    let retrieve = try #require(try peer.events("Retrieve").first, "\(peer.diagnostics)")
                    let objects = try #require(retrieve.at("data.objects")?.arrayValue)
                    // On, by brightness descending: garden 95, kitchen 80, desk 55, porch 30; skip 1, take 2.
                    #expect(objects.map(\.objectIdValue) == [lamps[0].objectId, lamps[2].objectId])
                    #expect(objects.first == lamps[0].json)
                }
            }
        }
    }
}
