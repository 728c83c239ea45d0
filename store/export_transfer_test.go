package store

// TransferOutWithID is the donor's step of a transfer under a given id (to play a resent step).
var TransferOutWithID = (*Stock).transferOut
