import CoatyFuzzTargets
import Foundation
import Testing

/// Every committed fuzz input (`Fuzz/Corpus/<target>/`: the seeds, and each input a fuzzer found
/// a violation with) runs through its target's properties here, in every test run.
@Suite("Fuzz corpora replayed")
struct FuzzCorpusTests {
    @Test(arguments: FuzzTarget.allCases)
    func everyCommittedInputHoldsTheProperties(target: FuzzTarget) throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/Corpus/\(target.rawValue)").standardized.path
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(files.count >= 3, "seed inputs for \(target.rawValue)")
        for file in files {
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: directory + "/" + file)))
            #expect(target.check(bytes) == nil, "\(target.rawValue)/\(file)")
        }
    }
}
