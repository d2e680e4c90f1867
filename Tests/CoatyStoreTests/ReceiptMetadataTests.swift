import CoatyCore
import Foundation
import Testing

@testable import CoatyRecording
@testable import CoatyStore

@Suite("Receipt metadata")
struct ReceiptMetadataTests {
    static let dates: [Date] = [
        Date(timeIntervalSince1970: 1_700_000_000.123), Date(timeIntervalSince1970: 1_700_000_000),
        Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.0), Date(timeIntervalSince1970: -12.5),
        Date(timeIntervalSince1970: 1e13), Date(timeIntervalSince1970: 0.0001),
    ]

    /// The recorder's direct JSON of a receipt is exactly what `JSONValueEncoder` writes, as a tree.
    @Test(arguments: dates)
    func directJSONIsTheEncodersJSON(receivedAt: Date) throws {
        for sourceId in [nil, CoatyUUID()] {
            let receipt = ReceiptMetadata(
                sourceId: sourceId,
                eventType: "Advertise",
                topic: "t/1",
                receivedAt: receivedAt
            )
            let encoded = try JSONValueEncoder().encode(receipt)
            #expect(try JSONValue(parsing: receipt.jsonText) == encoded)
            #expect(try AnyCoatyObject.storeCoding.encodeMetadata(receipt) == encoded)
        }
    }

    /// The receipt's text, written straight to bytes, is the encoder's JSON serialized: byte for byte, with escapes.
    @Test(arguments: dates)
    func directTextIsTheEncodersText(receivedAt: Date) throws {
        for (sourceId, topic) in [(nil, "t/1"), (CoatyUUID(), #"coaty/3/Advertise:x/"quoted"\\tab\t\u{1}é"#)] {
            let receipt = ReceiptMetadata(sourceId: sourceId, eventType: "Chan\"nel", topic: topic, receivedAt: receivedAt)
            let encoded = try JSONValueEncoder().encode(receipt)
            #expect(String(decoding: receipt.jsonText, as: UTF8.self) == encoded.serializedString())
            let text = try #require(AnyCoatyObject.storeCoding.encodeMetadataText(receipt))
            #expect(text == receipt.jsonText)
            // A row made with the text reads its metadata back as the tree.
            let row = StoreRow(index: StoreIndex("c", "k"), object: ["a": 1], metadataText: text)
            #expect(row.metadata == encoded)
            #expect(row == StoreRow(index: StoreIndex("c", "k"), object: ["a": 1], metadata: encoded))
        }
        #expect(StoreCoding<AnyCoatyObject, NoMetadata>(
            scope: .all, index: { _ in StoreIndex("c", "k") }, indexForKey: { _ in nil }, encode: { $0.jsonValue },
            decode: { _ in throw CancellationError() }
        ).encodeMetadataText(nil) == nil)
    }
}
